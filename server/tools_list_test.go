package server_test

import (
	"context"
	"testing"

	"github.com/assent-run/assent/internal/assenttest"
)

// Tools no agent can call are not offered to agents: effect-only tools run
// only as a Flow transition's effect.
func TestEffectOnlyToolsAreNotListed(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, tl := range res.Tools {
		listed[tl.Name] = true
	}
	for _, name := range []string{"payments_send", "payments_status"} {
		if listed[name] {
			t.Errorf("effect-only tool %s is in the agent's tool list", name)
		}
	}
	if !listed["flows_apply"] || !listed["controls_execute"] {
		t.Fatalf("tool list lacks the served tools: %v", listed)
	}
}
