package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/client"
	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/wire"
)

func newClient(t *testing.T, f *assenttest.Kit, token string) *client.Client {
	t.Helper()
	c, err := client.New(f.URL(), token, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewRefusesAddressesThatAreNotAServer(t *testing.T) {
	for _, u := range []string{"", "ftp://h", "localhost:7410", "http://", "http://u:p@h", "http://h/?q=1", "http://h/#f", "::"} {
		if _, err := client.New(u, "t", nil); err == nil {
			t.Errorf("New(%q) = nil error", u)
		}
	}
	c, err := client.New("http://127.0.0.1:7410/prefix/", "t", nil)
	if err != nil || c.BaseURL() != "http://127.0.0.1:7410/prefix" {
		t.Fatalf("New = %v, %v", c, err)
	}
}

func TestBasics(t *testing.T) {
	f := assenttest.Start(t, nil)
	ctx := t.Context()
	anon := newClient(t, f, "")
	h, err := anon.Health(ctx)
	if err != nil || h.Status != "ok" || h.Store != "sqlite" || h.Version == "" {
		t.Fatalf("Health = %+v, %v", h, err)
	}
	// A node just started may not have renewed its leases yet: then it
	// answers 503 with the body that says so.
	r, err := anon.Ready(ctx)
	switch e, _ := client.AsError(err); {
	case err == nil && r.Status == "ready" && r.Store == "ok" && r.Leases == "ok":
	case e != nil && e.Code == wire.Unavailable && e.Status == http.StatusServiceUnavailable && r.Status == "not_ready" && r.Error != nil:
	default:
		t.Fatalf("Ready = %+v, %v", r, err)
	}
	doc, err := anon.OpenAPI(ctx)
	var head struct {
		OpenAPI string `json:"openapi"`
	}
	if err != nil || json.Unmarshal(doc, &head) != nil || head.OpenAPI != "3.1.0" {
		t.Fatalf("OpenAPI = %.100s, %v", doc, err)
	}
	_, err = anon.Whoami(ctx)
	e, ok := client.AsError(err)
	if !ok || e.Code != wire.SignInRequired || e.Status != http.StatusUnauthorized || e.Message == "" {
		t.Fatalf("Whoami without a token: %#v", err)
	}
	who, err := newClient(t, f, f.Token).Whoami(ctx)
	if err != nil || who.ID != f.Boot.Agent.ID || who.Kind != "agent" || who.CreatedAt.IsZero() || who.Supervisors == nil {
		t.Fatalf("Whoami = %+v, %v", who, err)
	}
}

// An error answer is the server's own error type, with its status, code,
// retryable flag and data.
func TestErrorIsTheWireError(t *testing.T) {
	f := assenttest.Start(t, nil)
	c := newClient(t, f, f.Token)
	_, err := c.Run(t.Context(), "nope")
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.NotFound || we.Status != http.StatusNotFound || we.Retryable {
		t.Fatalf("Run(nope) = %#v", err)
	}
	// A body that is not the error shape still gives an *Error.
	err = c.Do(t.Context(), "GET", "/no-such-page-at-all", nil, nil)
	if e, ok := client.AsError(err); !ok || e.Status != http.StatusNotFound || e.Code == "" {
		t.Fatalf("Do(unknown page) = %#v", err)
	}
}

func TestTransportError(t *testing.T) {
	c, err := client.New("http://127.0.0.1:1", "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Health(t.Context())
	var te *client.TransportError
	if !errors.As(err, &te) || te.URL != "http://127.0.0.1:1" {
		t.Fatalf("Health of nothing = %#v", err)
	}
	if _, ok := client.AsError(err); ok {
		t.Fatal("a transport error reads as an answer")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.Health(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Health with a cancelled context = %v", err)
	}
}

func TestControls(t *testing.T) {
	f := assenttest.StartDemo(t)
	ctx := t.Context()
	c := newClient(t, f, f.Token)
	all, err := c.Controls(ctx, "")
	if err != nil || len(all) == 0 {
		t.Fatalf("Controls = %d, %v", len(all), err)
	}
	profile, err := c.Controls(ctx, "profile")
	if err != nil || len(profile) == 0 {
		t.Fatalf("Controls(profile) = %d of %d, %v", len(profile), len(all), err)
	}
	if none, err := c.Controls(ctx, "no-such-form"); err != nil || len(none) != 0 {
		t.Fatalf("Controls(no-such-form) = %v, %v", none, err)
	}
	for _, s := range profile {
		if s.Identity.FormID != "profile" {
			t.Fatalf("Controls(profile) has %v", s.Identity)
		}
	}
	id := control.Identity{FormID: "profile", ControlID: "plan"}
	snap, err := c.Control(ctx, id)
	if err != nil || snap.Identity.ControlID != "plan" || snap.Metadata.Label == "" {
		t.Fatalf("Control = %+v, %v", snap, err)
	}
	a, err := c.Execute(ctx, api.ExecuteRequest{Action: "stage", Identity: id, Value: json.RawMessage(`"pro"`)})
	if err != nil || !a.OK || a.Snapshot.State.Staged == nil {
		t.Fatalf("Execute(stage) = %+v, %v", a, err)
	}
	// An agent's apply is refused: the answer and the error both come
	// back.
	a, err = c.Execute(ctx, api.ExecuteRequest{Action: "apply", Identity: id, Revision: a.Snapshot.State.Staged.Revision})
	e, ok := client.AsError(err)
	if !ok || a.OK || a.Reason == "" || string(e.Code) != string(a.Reason) || e.Status != http.StatusForbidden {
		t.Fatalf("Execute(apply) by an agent = %+v, %#v", a, err)
	}
	recs, err := c.Audit(ctx, client.AuditQuery{FormID: "profile"})
	if err != nil || len(recs) < 2 || recs[len(recs)-1].Action != "apply" || recs[len(recs)-1].OK {
		t.Fatalf("Audit = %+v, %v", recs, err)
	}
	if _, err := c.Audit(ctx, client.AuditQuery{Limit: 5000}); err == nil {
		t.Fatal("Audit with limit 5000 was not refused")
	}
}

func TestRunsAndProposals(t *testing.T) {
	f := assenttest.Start(t, nil)
	ctx := t.Context()
	c := newClient(t, f, f.Token)
	// An agent's inline template waits for a person.
	r, pending, err := c.Spawn(ctx, api.SpawnRequest{Template: json.RawMessage(`"echo hi"`), RunID: "hello"})
	if err != nil || r != nil || pending == nil || pending.Status != string(run.StatusPendingApproval) || pending.Proposal == "" {
		t.Fatalf("Spawn = %+v, %+v, %v", r, pending, err)
	}
	props, err := c.Proposals(ctx, "")
	if err != nil || len(props) != 1 || props[0].ID != pending.Proposal {
		t.Fatalf("Proposals = %+v, %v", props, err)
	}
	p, err := c.Proposal(ctx, pending.Proposal)
	if err != nil || p.ID != pending.Proposal || p.Status != "pending" {
		t.Fatalf("Proposal = %+v, %v", p, err)
	}
	list, err := c.Runs(ctx, "")
	if err != nil || len(list.Runs) != 0 || list.OwnerSession != f.Boot.Agent.ID {
		t.Fatalf("Runs = %+v, %v", list, err)
	}
	if _, _, err := c.Spawn(ctx, api.SpawnRequest{Recipe: "no-such-recipe"}); err == nil {
		t.Fatal("Spawn of a missing Recipe succeeded")
	}
	if _, err := c.Kill(ctx, "nope"); !isCode(err, wire.NotFound) {
		t.Fatalf("Kill(nope) = %v", err)
	}
	if _, err := c.Logs(ctx, "nope", "stdout", 10); !isCode(err, wire.NotFound) {
		t.Fatalf("Logs(nope) = %v", err)
	}
}

func isCode(err error, code wire.Code) bool {
	e, ok := client.AsError(err)
	return ok && e.Code == code
}

func TestDoKeepsTheRawAnswer(t *testing.T) {
	f := assenttest.Start(t, nil)
	c := newClient(t, f, f.Token)
	var raw json.RawMessage
	if err := c.Do(t.Context(), "GET", "/v1/whoami", nil, &raw); err != nil || !strings.Contains(string(raw), `"created_at"`) {
		t.Fatalf("Do = %s, %v", raw, err)
	}
	var wrong []int
	if err := c.Do(t.Context(), "GET", "/v1/whoami", nil, &wrong); err == nil || !strings.Contains(err.Error(), "does not decode") {
		t.Fatalf("Do into the wrong type = %v", err)
	}
}

func TestFlows(t *testing.T) {
	f := assenttest.StartDemo(t)
	ctx := t.Context()
	c := newClient(t, f, f.Token)
	progs, err := c.Programs(ctx)
	if err != nil || len(progs) == 0 {
		t.Fatalf("Programs = %v, %v", progs, err)
	}
	var fp string
	for _, p := range progs {
		if p.ProgramID == "expense-approval" {
			fp = p.Fingerprint
		}
	}
	if fp == "" {
		t.Fatalf("no expense-approval among %+v", progs)
	}
	doc, err := c.Program(ctx, fp)
	if err != nil || doc.Program.Fingerprint != fp || !json.Valid(doc.Canonical) || len(doc.Canonical) < 10 {
		t.Fatalf("Program = %+v, %v", doc, err)
	}
	inst, err := c.StartInstance(ctx, api.StartRequest{Program: "expense-approval", ID: "e-1", Phase: "draft"})
	if err != nil || inst.ID != "e-1" || inst.Program != fp || inst.Phase != "draft" {
		t.Fatalf("StartInstance = %+v, %v", inst, err)
	}
	if _, err := c.StartInstance(ctx, api.StartRequest{Program: "expense-approval", ID: "e-1", Phase: "draft"}); !isCode(err, wire.AlreadyExists) {
		t.Fatalf("StartInstance again = %v", err)
	}
	rows, err := c.Instances(ctx)
	if err != nil || len(rows) == 0 {
		t.Fatalf("Instances = %+v, %v", rows, err)
	}
	v, err := c.Instance(ctx, "e-1")
	if err != nil || v.Instance.ID != "e-1" || v.Program.Fingerprint != fp || v.Journal == nil {
		t.Fatalf("Instance = %+v, %v", v, err)
	}
	if _, err := c.Prescribe(ctx, "nope", flow.Request{}); !isCode(err, wire.NotFound) {
		t.Fatalf("Prescribe(nope) = %v", err)
	}
	// An agent's program only waits for a person.
	prog := strings.Replace(examplePaymentProgram, `"expense-approval"`, `"mine"`, 1)
	loaded, proposal, err := c.LoadProgram(ctx, []byte(prog))
	if err != nil || loaded != nil || proposal == nil || proposal.Status != "pending_approval" || proposal.Program.Fingerprint == "" {
		t.Fatalf("LoadProgram by an agent = %+v, %+v, %v", loaded, proposal, err)
	}
	if _, err := c.Approvals(ctx, ""); err != nil {
		t.Fatalf("Approvals = %v", err)
	}
	if _, err := c.Approval(ctx, "nope"); !isCode(err, wire.NotFound) {
		t.Fatalf("Approval(nope) = %v", err)
	}
}

// examplePaymentProgram is a one-transition Flow program.
const examplePaymentProgram = `{
  "schema_version": 1, "program_id": "expense-approval", "program_version": "6.6.6", "requires_runtime": ">=0.1.0",
  "capabilities": {"effects": ["tool.call"], "verifiers": ["conditions.match"], "capability_surface": ["tool.invoke"]},
  "owned_resources": [],
  "objective_contracts": [{"objective": "paid", "conditions": [{"facet": "phase", "statuses": ["known"], "values": ["paid"]}]}],
  "transitions": [{
    "id": "pay", "selection_class": "PROGRESS", "priority": 1, "source_phases": ["start"], "target_phases": ["paid"],
    "authority": ["agent"], "parameters": [{"name": "iban", "required": true}],
    "required_capabilities": ["tool.invoke"], "effect": "tool.call", "verifier": "conditions.match",
    "prescription": {"operation": "pay", "arguments": ["payments_send"], "expected_postcondition": "paid"}
  }]
}`

func TestRunLifecycle(t *testing.T) {
	f := assenttest.Start(t, nil)
	ctx := t.Context()
	svc, _ := f.Issue(store.KindService, "runner")
	c := newClient(t, f, svc)
	r, pending, err := c.Spawn(ctx, api.SpawnRequest{Template: json.RawMessage(`"sleep 30"`), RunID: "sleeper"})
	if err != nil || pending != nil || r == nil || r.ID != "sleeper" || r.Generation != 1 {
		t.Fatalf("Spawn = %+v, %+v, %v", r, pending, err)
	}
	got, err := c.Run(ctx, "sleeper")
	if err != nil || got.ID != "sleeper" || got.InstanceID != r.InstanceID {
		t.Fatalf("Run = %+v, %v", got, err)
	}
	list, err := c.Runs(ctx, "")
	if err != nil || len(list.Runs) != 1 || list.Runs[0].ID != "sleeper" {
		t.Fatalf("Runs = %+v, %v", list, err)
	}
	if _, err := c.Logs(ctx, "sleeper", "stdout", 10); err != nil {
		t.Fatalf("Logs = %v", err)
	}
	if _, err := c.Archive(ctx, "sleeper"); !isCode(err, wire.NotTerminal) {
		t.Fatalf("Archive of a live Run = %v", err)
	}
	k, err := c.Kill(ctx, "sleeper")
	if err != nil || !k.Killed || k.SignalTarget == "" {
		t.Fatalf("Kill = %+v, %v", k, err)
	}
}

func TestScreens(t *testing.T) {
	f := assenttest.Start(t, nil)
	ctx := t.Context()
	c := newClient(t, f, f.Token)
	sum, err := c.ShowScreen(ctx, "root = Text($s)\n$s = \"start\"\n")
	if err != nil || sum.ID == "" || sum.Components == 0 || len(sum.Rejected) != 0 {
		t.Fatalf("ShowScreen = %+v, %v", sum, err)
	}
	rows, err := c.Screens(ctx)
	if err != nil || len(rows) != 1 || rows[0].ID != sum.ID || rows[0].Owner != f.Boot.Agent.ID {
		t.Fatalf("Screens = %+v, %v", rows, err)
	}
	got, err := c.Screen(ctx, sum.ID)
	if err != nil || got.ID != sum.ID {
		t.Fatalf("Screen = %+v, %v", got, err)
	}
	// Updates come from a service, never from an agent.
	if _, err := c.UpdateScreen(ctx, sum.ID, "$s = \"next\"\n"); !isCode(err, wire.Forbidden) {
		t.Fatalf("UpdateScreen by an agent = %v", err)
	}
	if err := c.DeleteScreen(ctx, sum.ID); err != nil {
		t.Fatalf("DeleteScreen = %v", err)
	}
	if _, err := c.Screen(ctx, sum.ID); !isCode(err, wire.NotFound) {
		t.Fatalf("Screen after delete = %v", err)
	}
}

func TestProposalDecision(t *testing.T) {
	f := assenttest.Start(t, nil)
	ctx := t.Context()
	_, pending, err := newClient(t, f, f.Token).Spawn(ctx, api.SpawnRequest{Template: json.RawMessage(`"echo hi"`), RunID: "hello"})
	if err != nil || pending == nil {
		t.Fatalf("Spawn = %+v, %v", pending, err)
	}
	if _, err := newClient(t, f, f.Token).DecideProposal(ctx, pending.Proposal, true, ""); err == nil {
		t.Fatal("an agent approved its own proposal")
	}
	person, _ := f.Issue(store.KindHuman, "approver")
	p, err := newClient(t, f, person).DecideProposal(ctx, pending.Proposal, false, "not now")
	if err != nil || p.Status != "declined" {
		t.Fatalf("DecideProposal(decline) = %+v, %v", p, err)
	}
	raw, err := newClient(t, f, f.Token).Inspect(ctx, run.InspectRequest{Target: "runtime", View: "runs"})
	if err != nil || !strings.Contains(string(raw), `"runs"`) {
		t.Fatalf("Inspect = %s, %v", raw, err)
	}
}

func TestHostedForm(t *testing.T) {
	f := assenttest.Start(t, nil)
	ctx := t.Context()
	svc, _ := f.Issue(store.KindService, "billing")
	c := newClient(t, f, svc)
	snaps, err := c.DeclareForm(ctx, "billing", []api.HostedControl{
		{ControlID: "plan", Metadata: control.Metadata{Kind: "text", Label: "Plan"}, Value: "free"},
	})
	if err != nil || len(snaps) != 1 || snaps[0].State.Value != "free" {
		t.Fatalf("DeclareForm = %+v, %v", snaps, err)
	}
	id := control.Identity{FormID: "billing", ControlID: "plan"}
	snap, err := c.SetValue(ctx, id, "pro")
	if err != nil || snap.State.Value != "pro" {
		t.Fatalf("SetValue = %+v, %v", snap, err)
	}
	if _, err := newClient(t, f, f.Token).SetValue(ctx, id, "x"); !isCode(err, wire.NotFound) {
		t.Fatalf("SetValue by another principal = %v", err)
	}
	if err := c.RemoveForm(ctx, "billing"); err != nil {
		t.Fatalf("RemoveForm = %v", err)
	}
	if _, err := c.Control(ctx, id); !isCode(err, wire.NotFound) {
		t.Fatalf("Control after RemoveForm = %v", err)
	}
}

// LoadProgramWith sends the reason and the deadline of an agent's
// proposal: the server stores the reason with the proposal and declines it
// at the deadline, a part of a second counting as one; what the server
// refuses comes back with its code.
func TestLoadProgramWith(t *testing.T) {
	f := assenttest.StartDemo(t)
	ctx := t.Context()
	c := newClient(t, f, f.Token)
	for i, tc := range []struct {
		name    string
		opts    client.ProgramOptions
		code    wire.Code // "" when the proposal is filed
		seconds int64     // the deadline the server keeps, 0 for none
	}{
		{"neither", client.ProgramOptions{}, "", 0},
		{"a reason and an hour", client.ProgramOptions{Reason: "pay suppliers & staff faster?", Deadline: time.Hour}, "", 3600},
		{"part of a second", client.ProgramOptions{Deadline: 1500 * time.Millisecond}, "", 2},
		{"a reason too long", client.ProgramOptions{Reason: strings.Repeat("x", 501)}, wire.InvalidValue, 0},
		{"over thirty days", client.ProgramOptions{Deadline: 31 * 24 * time.Hour}, wire.InvalidRequest, 0},
		{"a negative deadline", client.ProgramOptions{Deadline: -time.Minute}, wire.InvalidRequest, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prog := strings.Replace(examplePaymentProgram, `"expense-approval"`, fmt.Sprintf(`"with-%d"`, i), 1)
			before := time.Now()
			loaded, proposal, err := c.LoadProgramWith(ctx, []byte(prog), tc.opts)
			if tc.code != "" {
				if !isCode(err, tc.code) {
					t.Fatalf("LoadProgramWith = %+v, %+v, %v; want %s", loaded, proposal, err, tc.code)
				}
				return
			}
			if err != nil || loaded != nil || proposal == nil || proposal.Status != "pending_approval" {
				t.Fatalf("LoadProgramWith = %+v, %+v, %v", loaded, proposal, err)
			}
			if tc.seconds == 0 != proposal.Deadline.IsZero() {
				t.Fatalf("deadline %v, want one of %ds", proposal.Deadline, tc.seconds)
			}
			if d := time.Duration(tc.seconds) * time.Second; tc.seconds > 0 && (proposal.Deadline.Before(before.Add(d).Truncate(time.Second)) || proposal.Deadline.After(time.Now().Add(d))) {
				t.Fatalf("deadline %v, want %s from now", proposal.Deadline, d)
			}
			l, err := f.Srv.Flows().Kernel().ProgramLoad(ctx, proposal.Program.Fingerprint)
			if err != nil || l.Why != tc.opts.Reason {
				t.Fatalf("stored proposal %+v, %v; want the reason %q", l, err, tc.opts.Reason)
			}
		})
	}
}
