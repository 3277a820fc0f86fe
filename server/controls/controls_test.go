package controls_test

import (
	"context"
	"encoding/json"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/store"
)

func TestAgentStagesPersonApplies(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	plan := map[string]any{"formId": "profile", "controlId": "plan"}

	out, isErr := assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "stage", "identity": plan, "value": "pro"})
	if isErr || out["ok"] != true {
		t.Fatalf("stage: %v", out)
	}
	out, isErr = assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "apply", "identity": plan})
	if !isErr || out["reason"] != "human_confirmation_required" {
		t.Fatalf("agent apply: %v", out)
	}
	for _, extra := range []map[string]any{{"source": "user"}, {"confirmed": true}} {
		args := map[string]any{"action": "stage", "identity": plan, "value": "team"}
		for k, v := range extra {
			args[k] = v
		}
		out, isErr = assenttest.CallTool(t, cs, "controls_execute", args)
		if !isErr || !strings.Contains(string(assenttest.MustJSON(out)), "invalid_params") {
			t.Fatalf("forged %v: %v", extra, out)
		}
	}
	// The forged stages ran nothing: the proposal is still "pro".
	snap, _ := assenttest.CallTool(t, cs, "controls_inspect", map[string]any{"identity": plan})
	state := snap["state"].(map[string]any)
	if state["value"] != "free" || state["stagedValue"] != "pro" {
		t.Fatalf("after forged commands: %v", state)
	}
	rev := int64(state["staged"].(map[string]any)["revision"].(float64))

	// The person sees it in the inbox and applies it.
	cookie, csrf := f.SignIn()
	page, _ := io.ReadAll(f.Get("/inbox", cookie).Body)
	// Values read as the options' labels, and each button names the
	// control it acts on.
	for _, want := range []string{"Plan", "<dt>Now</dt><dd>Free</dd>", "<dt>Proposed</dt><dd>Pro</dd>", "<dt>Proposed by</dt><dd>agent</dd>", `Apply<span class="visually-hidden">: Plan</span>`, "Discard"} {
		if !strings.Contains(string(page), want) {
			t.Fatalf("inbox lacks %q", want)
		}
	}
	resp := f.PostForm("/web/controls/apply", url.Values{"csrf": {csrf}, "formId": {"profile"}, "controlId": {"plan"}, "revision": {itoa(rev)}}, cookie, f.HTTP.URL)
	if resp.StatusCode != 303 || strings.Contains(resp.Header.Get("Location"), "notice") {
		t.Fatalf("person apply: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	snap, _ = assenttest.CallTool(t, cs, "controls_inspect", map[string]any{"identity": plan})
	if v := snap["state"].(map[string]any)["value"]; v != "pro" {
		t.Fatalf("value after apply = %v", v)
	}

	// The audit log has the stage, the refused apply and the person's apply.
	var audit struct {
		Records []store.AuditRecord `json:"records"`
	}
	json.NewDecoder(f.Req("GET", "/v1/audit?formId=profile", f.Token, nil, nil).Body).Decode(&audit)
	var got []string
	for _, r := range audit.Records {
		got = append(got, r.Source+":"+r.Action+":"+r.Reason)
	}
	want := "agent:stage:,agent:apply:human_confirmation_required,user:apply:"
	if strings.Join(got, ",") != want {
		t.Fatalf("audit = %v, want %s", got, want)
	}
}

func TestSecretControlNeverLeaks(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	key := map[string]any{"formId": "profile", "controlId": "apiKey"}
	for _, args := range []map[string]any{
		{"action": "explain", "identity": key},
		{"action": "stage", "identity": key, "value": "sk-new"},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "controls_execute", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		raw := string(assenttest.MustJSON(res))
		if strings.Contains(raw, "sk-demo") || strings.Contains(raw, "sk-new") {
			t.Fatalf("secret leaked: %s", raw)
		}
	}
	list, _ := assenttest.CallTool(t, cs, "controls_list", map[string]any{"formId": "profile"})
	if strings.Contains(string(assenttest.MustJSON(list)), "sk-demo") {
		t.Fatal("secret in controls_list")
	}
	body, _ := io.ReadAll(f.Req("GET", "/v1/audit", f.Token, nil, nil).Body)
	if strings.Contains(string(body), "sk-") {
		t.Fatalf("secret in audit: %s", body)
	}
}

func TestIdentityLimits(t *testing.T) {
	f := assenttest.StartDemo(t)
	cs, err := f.MCPSession(f.Token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, tc := range []struct {
		id   map[string]any
		want string
	}{
		// The limits the input schema states are refused before the
		// command reaches the registry.
		{map[string]any{"formId": strings.Repeat("f", 257), "controlId": "x"}, "invalid_params"},
		{map[string]any{"formId": "", "controlId": "x"}, "invalid_params"},
		{map[string]any{"formId": "a\x01b", "controlId": "x"}, "invalid_request"},
		{map[string]any{"formId": "profile", "controlId": "nope"}, "not_found"},
	} {
		out, isErr := assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "explain", "identity": tc.id})
		if !isErr || out["reason"] != tc.want && assenttest.ErrCode(out) != tc.want {
			t.Errorf("identity %v: %v, want %s", tc.id, out, tc.want)
		}
	}
	out, isErr := assenttest.CallTool(t, cs, "controls_execute", map[string]any{"action": "highlight", "identity": map[string]any{"formId": "profile", "controlId": "plan"}, "durationMs": 60001})
	if !isErr || assenttest.ErrCode(out) != "invalid_params" {
		t.Errorf("durationMs over limit: %v", out)
	}
}

func TestHostedForm(t *testing.T) {
	f := assenttest.Start(t, nil)
	svc, _, err := auth.IssueToken(context.Background(), f.DB, "service", "crm", nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	decl := `{"controls":[{"controlId":"status","subject":{"type":"order","id":"42"},"metadata":{"kind":"select","label":"Status","options":[{"value":"open","label":"Open"},{"value":"shipped","label":"Shipped"}]},"value":"open"}]}`
	// Agents cannot declare forms.
	if resp := f.Req("POST", "/v1/forms/orders/controls", f.Token, strings.NewReader(decl), nil); resp.StatusCode != 403 {
		t.Fatalf("agent declare: %d", resp.StatusCode)
	}
	ev := f.Events("")
	if resp := f.Req("POST", "/v1/forms/orders/controls", svc, strings.NewReader(decl), nil); resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("declare: %d %s", resp.StatusCode, b)
	}
	if e := ev.Next(t); e.Type != "control.form" {
		t.Fatalf("event %+v, want the form declared", e)
	}
	stage := `{"action":"stage","identity":{"formId":"orders","controlId":"status","subject":{"type":"order","id":"42"}},"value":"shipped"}`
	if resp := f.Req("POST", "/v1/controls/execute", f.Token, strings.NewReader(stage), nil); resp.StatusCode != 200 {
		t.Fatalf("agent stage: %d", resp.StatusCode)
	}
	if e := ev.Next(t); e.Type != "control.command" || !strings.Contains(e.Data, `"shipped"`) {
		t.Fatalf("event %+v", e)
	}
	// The application records a person's own edit: the proposal goes stale.
	if resp := f.Req("PUT", "/v1/forms/orders/controls/status/value", svc, strings.NewReader(`{"value":"open ","subject":{"type":"order","id":"42"}}`), nil); resp.StatusCode != 200 {
		t.Fatalf("set value: %d", resp.StatusCode)
	}
	cookie, csrf := f.SignIn()
	resp := f.PostForm("/web/controls/apply", url.Values{"csrf": {csrf}, "formId": {"orders"}, "controlId": {"status"}, "subjectType": {"order"}, "subjectId": {"42"}}, cookie, f.HTTP.URL)
	if loc := resp.Header.Get("Location"); loc != "/inbox" || !strings.Contains(assenttest.ReadAll(f.Get(loc, cookie)), "apply refused") {
		t.Fatalf("apply of a stale proposal was not refused: %s", loc)
	}
	// A human's bearer token is not a confirmation.
	human, _, _ := auth.IssueToken(context.Background(), f.DB, "human", "pat", nil, time.Now())
	apply := `{"action":"apply","identity":{"formId":"orders","controlId":"status","subject":{"type":"order","id":"42"}},"value":"shipped"}`
	resp = f.Req("POST", "/v1/controls/execute", human, strings.NewReader(apply), nil)
	var res map[string]any
	json.NewDecoder(resp.Body).Decode(&res)
	if res["reason"] != "consent_required" {
		t.Fatalf("human bearer apply: %v", res)
	}
	// Only the owner removes the form.
	if resp := f.Req("DELETE", "/v1/forms/orders/controls", f.Token, nil, nil); resp.StatusCode != 404 {
		t.Fatalf("delete by another: %d", resp.StatusCode)
	}
	if resp := f.Req("DELETE", "/v1/forms/orders/controls", svc, nil, nil); resp.StatusCode != 204 {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
}

func itoa(n int64) string { return strings.TrimSpace(string(assenttest.MustJSON(n))) }
