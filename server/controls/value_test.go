package controls_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/assent-run/assent/internal/assenttest"
)

// An agent's proposal that does not fit the control is refused before a
// person can be asked to apply it; a stage that forgot its value is a
// malformed request, not a proposal of null.
func TestAgentProposalsAreCheckedAgainstTheControl(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	id := func(c string) map[string]any { return map[string]any{"formId": "profile", "controlId": c} }

	tests := []struct {
		name    string
		control string
		args    map[string]any
		reason  string
	}{
		{"option not offered", "plan", map[string]any{"value": "enterprise"}, "invalid_value"},
		{"not an email", "email", map[string]any{"value": "not-an-email"}, "invalid_value"},
		{"object into text", "displayName", map[string]any{"value": map[string]any{"first": "Ada"}}, "invalid_value"},
		{"no value", "plan", map[string]any{}, "invalid_request"},
		{"valid option", "plan", map[string]any{"value": "team"}, ""},
		{"valid email", "email", map[string]any{"value": "ada.new@example.com"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := map[string]any{"action": "stage", "identity": id(tc.control)}
			for k, v := range tc.args {
				args[k] = v
			}
			out, isErr := assenttest.CallTool(t, cs, "controls_execute", args)
			if tc.reason == "" {
				if isErr || out["ok"] != true {
					t.Fatalf("stage %v: %v", tc.args, out)
				}
				return
			}
			if !isErr || out["reason"] != tc.reason || out["message"] == "" {
				t.Fatalf("stage %v = %v, want refusal %s with a message", tc.args, out, tc.reason)
			}
		})
	}
	// Only the valid proposals wait for the person.
	snap, _ := assenttest.CallTool(t, cs, "controls_inspect", map[string]any{"identity": id("plan")})
	if v := snap["state"].(map[string]any)["stagedValue"]; v != "team" {
		t.Fatalf("plan proposal = %v, want team", v)
	}

	// The HTTP API answers the same way.
	for body, want := range map[string]string{
		`{"action":"stage","identity":{"formId":"profile","controlId":"plan"},"value":"enterprise"}`: "invalid_value",
		`{"action":"stage","identity":{"formId":"profile","controlId":"plan"}}`:                      "invalid_request",
	} {
		resp := f.Req("POST", "/v1/controls/execute", f.Token, bytes.NewReader([]byte(body)), map[string]string{"Content-Type": "application/json"})
		var res struct {
			OK     bool   `json:"ok"`
			Reason string `json:"reason"`
		}
		json.NewDecoder(resp.Body).Decode(&res)
		resp.Body.Close()
		if res.OK || res.Reason != want || resp.StatusCode == http.StatusOK {
			t.Errorf("POST %s = %d %+v, want %s", body, resp.StatusCode, res, want)
		}
	}
}
