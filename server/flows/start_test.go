package flows_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/store"
)

// known is a known fact as the HTTP API takes it.
func known(v string) map[string]string { return map[string]string{"status": "known", "value": v} }

// An agent starts an expense as a draft, with the facts a submitter knows;
// it cannot start one past the approval, claim the approval itself, or
// call a large amount, or an amount in another currency than the limit's,
// within the limit. People and services may start an
// instance where it stands.
func TestFlowStartRules(t *testing.T) {
	f := assenttest.StartDemo(t)
	agent, _ := f.Issue(store.KindAgent, "submitter", "state.write", "tool.invoke")
	service, _ := f.Issue(store.KindService, "importer", "state.write", "tool.invoke")
	tests := []struct {
		name  string
		token string
		phase string
		facts map[string]any
		code  int
		error string // the error code, or "" for a start
		band  string // the band the started instance holds
	}{
		{"agent past the approval", agent, "approved", map[string]any{"expense.amount": known("120.00 EUR")}, 403, "forbidden", ""},
		{"agent in a phase the program lacks", agent, "nowhere", nil, 400, "invalid_request", ""},
		{"service in a phase the program lacks", service, "nowhere", nil, 400, "invalid_request", ""},
		{"agent claims the approval", agent, "draft", map[string]any{"expense.amount": known("120.00 EUR"), "expense.approval": known("person")}, 403, "forbidden", ""},
		{"agent claims the payment", agent, "draft", map[string]any{"payment.status": known("sent")}, 403, "forbidden", ""},
		{"band the amount contradicts", agent, "draft", map[string]any{"expense.amount": known("9999999.00 EUR"), "expense.amount_band": known("within_limit")}, 400, "invalid_request", ""},
		{"band without an amount", agent, "draft", map[string]any{"expense.amount_band": known("within_limit")}, 400, "invalid_request", ""},
		{"amount that is no amount", agent, "draft", map[string]any{"expense.amount": known("a lot")}, 400, "invalid_request", ""},
		{"agent draft over the two-person limit", agent, "draft", map[string]any{"expense.amount": known("9999999.00 EUR")}, 201, "", "over_two_person_limit"},
		{"agent draft at the two-person limit", agent, "draft", map[string]any{"expense.amount": known("5000.00 EUR")}, 201, "", "over_limit"},
		{"band of one person above the two-person limit", agent, "draft", map[string]any{"expense.amount": known("5000.01 EUR"), "expense.amount_band": known("over_limit")}, 400, "invalid_request", ""},
		{"amount in another currency called within the limit", agent, "draft", map[string]any{"expense.amount": known("499.00 XAU"), "expense.amount_band": known("within_limit")}, 400, "invalid_request", ""},
		{"agent draft in another currency", agent, "draft", map[string]any{"expense.amount": known("499.00 XAU")}, 201, "", "over_two_person_limit"},
		{"agent draft over the limit", agent, "draft", map[string]any{"expense.amount": known("1250.00 EUR")}, 201, "", "over_limit"},
		{"agent draft within the limit", agent, "draft", map[string]any{"expense.amount": known("500.00 EUR"), "expense.amount_band": known("within_limit")}, 201, "", "within_limit"},
		{"service where it stands", service, "approved", map[string]any{"expense.amount": known("120.00 EUR"), "expense.approval": known("automatic")}, 201, "", "within_limit"},
		{"service still keeps to the band", service, "submitted", map[string]any{"expense.amount": known("800.00 EUR"), "expense.amount_band": known("within_limit")}, 400, "invalid_request", ""},
	}
	over := -1 // the last row that starts a draft over the limit, for one person
	for i, tt := range tests {
		if tt.band == "over_limit" {
			over = i
		}
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("start-%d", i)
			code, out, raw := f.API("POST", "/v1/flows/instances", tt.token, map[string]any{
				"program": "expense-approval", "id": id, "phase": tt.phase, "facts": tt.facts, "objective": "expense-paid"})
			if code != tt.code {
				t.Fatalf("start = %d %s, want %d", code, raw, tt.code)
			}
			if tt.error != "" {
				if got := string(errorOf(t, out).Code); got != tt.error {
					t.Fatalf("error code = %v (%s), want %s", got, raw, tt.error)
				}
				if code, _, _ := f.API("GET", "/v1/flows/instances/"+id, tt.token, nil); code != 404 {
					t.Errorf("a refused start left instance %s (%d)", id, code)
				}
				return
			}
			if got := assenttest.As[flow.Instance](t, out).Facts["expense.amount_band"].Value; got != tt.band {
				t.Errorf("the instance's band = %v, want %s (%s)", got, tt.band, raw)
			}
		})
	}

	// Over the limit, the agent's draft goes through submit to a person.
	for _, step := range []string{"submit", "approve"} {
		_, out, raw := f.API("POST", fmt.Sprintf("/v1/flows/instances/start-%d/prescribe", over), agent, nil)
		if step == "approve" {
			if decisionOf(t, out).Kind != "FRONTIER" || decisionOf(t, out).Awaiting != "human" || approvalOf(t, out).ID == "" {
				t.Fatalf("after submit, the expense over the limit does not wait for a person: %s", raw)
			}
			break
		}
		prx := prescriptionID(t, out)
		if code, _, raw := f.API("POST", "/v1/flows/prescriptions/"+prx+"/apply", agent, nil); prx == "" || code != 200 {
			t.Fatalf("%s: %d %s", step, code, raw)
		}
	}
}

// An agent starts a Flow over MCP with flows_start, by the same rules as
// the HTTP API: an entry phase starts, a later one is forbidden, and
// arguments of the wrong type name the field.
func TestFlowsStartTool(t *testing.T) {
	f := assenttest.StartDemo(t)
	agent, _ := f.Issue(store.KindAgent, "submitter", "state.write", "tool.invoke")
	cs, err := f.MCPSession(agent, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	call := func(args map[string]any) (*mcp.CallToolResult, map[string]any) {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "flows_start", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &out)
		return res, out
	}
	res, out := call(map[string]any{"program": "expense-approval", "phase": "draft", "id": "mcp-1",
		"facts": map[string]any{"expense.amount": known("86.50 EUR")}, "objective": "expense-paid"})
	if res.IsError || out["instance_id"] != "mcp-1" || out["phase"] != "draft" || assenttest.As[flow.Instance](t, out).Facts["expense.amount_band"].Value != "within_limit" {
		t.Fatalf("flows_start = %v %v", res.IsError, out)
	}
	if code, _, raw := f.API("GET", "/v1/flows/instances/mcp-1", agent, nil); code != 200 {
		t.Errorf("the started instance is not the agent's: %d %s", code, raw)
	}
	for _, tc := range []struct {
		name string
		args map[string]any
		code string
	}{
		{"past the approval", map[string]any{"program": "expense-approval", "phase": "approved"}, "forbidden"},
		{"same id", map[string]any{"program": "expense-approval", "phase": "draft", "id": "mcp-1"}, "already_exists"},
		{"facts of the wrong type", map[string]any{"program": "expense-approval", "phase": "draft", "facts": []string{"x"}}, "invalid_params"},
		{"a status no fact has", map[string]any{"program": "expense-approval", "phase": "draft", "facts": map[string]any{"expense.amount": map[string]any{"status": "maybe"}}}, "invalid_params"},
		{"an id the pattern refuses", map[string]any{"program": "expense-approval", "phase": "draft", "id": "../x"}, "invalid_params"},
	} {
		res, out := call(tc.args)
		if !res.IsError || string(errorOf(t, out).Code) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, out, tc.code)
		}
		if tc.code == "invalid_params" && errorOf(t, out).Data["field"] == nil {
			t.Errorf("%s: %v does not name the field", tc.name, out)
		}
	}
}
