package notify_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/store"
)

// A value an agent staged that was committed while no server ran (as when
// the process died right after the commit, before any message was
// written) is announced when the next server starts: the announcement is
// derived from the staged value the store keeps, so no crash between the
// two loses it.
func TestStagedValueCommittedWhileDownIsAnnounced(t *testing.T) {
	smtp, hooks := startSMTP(t), startHooks(t, 0)
	k, mod := setup(t, smtp, hooks)
	ctx := context.Background()
	svc, _ := k.Issue(store.KindService, "billing-app")
	if code, _, raw := k.API("POST", "/v1/forms/billing/controls", svc, map[string]any{"controls": []map[string]any{
		{"controlId": "limit", "metadata": map[string]any{"kind": "number", "label": "Limit"}, "value": 10},
	}}); code != http.StatusOK {
		t.Fatalf("declare: %d %s", code, raw)
	}
	k.Srv.Close()
	stagedAt := time.Now().UTC().Truncate(time.Millisecond)
	if err := k.DB.ControlRegistry().SaveControl(ctx, control.Update{
		Key: control.Key{FormID: "billing", ControlID: "limit"},
		Stage: &control.SavedProposal{Revision: 1000, StagedAt: stagedAt, Value: json.RawMessage(`99`), Base: json.RawMessage(`10`),
			Provenance: control.Provenance{Source: control.SourceAgent, PrincipalID: k.Boot.Agent.ID}},
	}); err != nil {
		t.Fatal(err)
	}
	k.Restart(mod)
	const item = "billing/limit@1000"
	testwait.Eventually(t, 10*time.Second, func() bool {
		got, _, _ := hooks.Got()
		for _, h := range got {
			if h.Body.Data.ItemID == item && h.Body.Type == "decision.pending" {
				return true
			}
		}
		return false
	}, "webhook about the value staged while down")
	mailFor(t, smtp, "99")
}
