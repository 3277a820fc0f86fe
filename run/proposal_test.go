package run

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

var (
	mallory = store.Principal{ID: "mallory", Kind: store.KindAgent, Grants: []string{"state.write", "tool.invoke"}}
	eve     = store.Principal{ID: "eve", Kind: store.KindAgent, Grants: []string{"state.write", "tool.invoke"}}
	trusted = store.Principal{ID: "trusted", Kind: store.KindAgent, Grants: []string{GrantCommandExecute}}
	person  = store.Principal{ID: "ada", Kind: store.KindHuman}
)

func newToolSet(t *testing.T, f *fixture) (*ToolSet, *tool.Registry) {
	t.Helper()
	reg := tool.NewRegistry()
	if err := reg.Register(tool.Tool{Name: "controls_list", Handler: func(context.Context, tool.Call) (*tool.Result, error) { return nil, nil }}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []store.Principal{mallory, eve, trusted, person} {
		if err := f.db.CreatePrincipal(context.Background(), p, nil); err != nil && !errors.Is(err, store.ErrConflict) {
			t.Fatal(err)
		}
	}
	ts := mustToolSet(t, f.db, f.m, reg)
	if err := ts.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ts, reg
}

// structured returns the structured content of res as a client decodes it.
func structured(t *testing.T, res *tool.Result) map[string]any {
	t.Helper()
	b, err := json.Marshal(res.Structured)
	var v map[string]any
	if err != nil || json.Unmarshal(b, &v) != nil || v == nil {
		t.Fatalf("result has no structured object: %+v", res)
	}
	return v
}

func runCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return toolCode(err)
}

// An agent without command.execute sends an inline template that would
// write outside its Run: nothing runs and nothing is claimed; a proposal is
// filed. Only a person can approve it, and approval runs the recorded
// script as the agent's own Run.
func TestAgentInlineSpawnBecomesProposal(t *testing.T) {
	f := newFixture(t)
	ts, reg := newToolSet(t, f)
	ctx := context.Background()
	pwned := filepath.Join(f.dir, "pwned")
	res, err := callAs(t, reg, ToolSpawn, mallory, `{"template":"touch `+pwned+`","as":"run:attack"}`)
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	v := structured(t, res)
	if v["status"] != StatusPendingApproval || v["proposal"] == "" || !strings.Contains(res.Text, "A person must approve this command") {
		t.Fatalf("answer: %v", v)
	}
	id := v["proposal"].(string)
	if _, err := f.db.Run(ctx, "attack"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a Run was claimed before approval: %v", err)
	}
	if _, err := os.Stat(pwned); !os.IsNotExist(err) {
		t.Fatalf("the command ran: %v", err)
	}
	// The agent follows its proposal.
	res, err = callAs(t, reg, ToolInspect, mallory, `{"target":"proposal:`+id+`","view":"status"}`)
	if err != nil || structured(t, res)["status"] != store.ProposalPending || structured(t, res)["script"] != "touch "+pwned {
		t.Fatalf("inspect: %v %v", res, err)
	}
	// Another agent cannot see it.
	if _, err := callAs(t, reg, ToolInspect, eve, `{"target":"proposal:`+id+`","view":"status"}`); toolCode(err) != CodeNotFound {
		t.Fatalf("eve inspects: %v", err)
	}
	// Agents, the proposer included, cannot approve.
	for _, p := range []store.Principal{mallory, trusted, {ID: "svc", Kind: store.KindService}} {
		if _, err := ts.Approve(ctx, p, id); runCode(err) != CodeForbidden {
			t.Fatalf("%s approves: %v", p.ID, err)
		}
	}
	pr, err := ts.Approve(ctx, person, id)
	if err != nil || pr.Status != store.ProposalApproved || pr.DecidedBy != "ada" {
		t.Fatalf("approve: %+v %v", pr, err)
	}
	rec := f.waitEnded("attack")
	if rec.OwnerID != "mallory" {
		t.Fatalf("Run owner %s", rec.OwnerID)
	}
	if d := decodeDoc(rec); d.Script != "touch "+pwned {
		t.Fatalf("ran %q", d.Script)
	}
	if _, err := ts.Approve(ctx, person, id); runCode(err) != CodeProposalDecided {
		t.Fatalf("second approval: %v", err)
	}
}

// A trusted agent (command.execute) and a person spawn inline templates
// directly.
func TestGrantedSpawnRunsDirectly(t *testing.T) {
	f := newFixture(t)
	_, reg := newToolSet(t, f)
	for _, p := range []store.Principal{trusted, person} {
		res, err := callAs(t, reg, ToolSpawn, p, `{"template":"true","as":"run:direct-`+p.ID+`"}`)
		if err != nil || structured(t, res)["status"] == StatusPendingApproval {
			t.Fatalf("%s: %v %v", p.ID, res, err)
		}
		f.waitEnded("direct-" + p.ID)
	}
	// Recipes from the recipes directory stay the operator's: agents spawn
	// them without approval.
	if err := os.WriteFile(filepath.Join(f.dir, "recipes", "hello.json"), []byte(`{"template":"echo hello"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := callAs(t, reg, ToolSpawn, mallory, `{"recipe":"hello","as":"run:hello"}`)
	if err != nil || structured(t, res)["status"] == StatusPendingApproval {
		t.Fatalf("recipe spawn: %v %v", res, err)
	}
	f.waitEnded("hello")
}

func TestDeclineRecordsReason(t *testing.T) {
	f := newFixture(t)
	ts, reg := newToolSet(t, f)
	ctx := context.Background()
	res, err := callAs(t, reg, ToolSpawn, mallory, `{"template":"echo {greeting}","values":{"greeting":"hi"}}`)
	if err != nil {
		t.Fatal(err)
	}
	id := structured(t, res)["proposal"].(string)
	if _, err := ts.Decline(ctx, mallory, id, "self-approved"); runCode(err) != CodeForbidden {
		t.Fatalf("agent declines: %v", err)
	}
	if _, err := ts.Decline(ctx, person, id, strings.Repeat("x", maxReasonBytes+1)); runCode(err) != CodeInvalidRequest {
		t.Fatalf("long reason: %v", err)
	}
	pr, err := ts.Decline(ctx, person, id, "not this one")
	if err != nil || pr.Status != store.ProposalDeclined || pr.Reason != "not this one" {
		t.Fatalf("decline: %+v %v", pr, err)
	}
	if _, err := ts.Approve(ctx, person, id); runCode(err) != CodeProposalDecided {
		t.Fatalf("approve after decline: %v", err)
	}
	runs, _ := f.db.ListRuns(ctx, "mallory")
	if len(runs) != 0 {
		t.Fatalf("a declined proposal started %d Runs", len(runs))
	}
}

// What approval runs is the record the person saw: a record changed in
// the store after it was filed is refused stale_proposal.
func TestApprovalRefusesChangedRecord(t *testing.T) {
	f := newFixture(t)
	ts, reg := newToolSet(t, f)
	ctx := context.Background()
	res, err := callAs(t, reg, ToolSpawn, mallory, `{"template":"echo {msg}","values":{"msg":"harmless"},"as":"run:swap"}`)
	if err != nil {
		t.Fatal(err)
	}
	id := structured(t, res)["proposal"].(string)
	var doc string
	if err := f.db.SQL().QueryRow(`SELECT doc FROM command_proposals WHERE id = ?`, id).Scan(&doc); err != nil {
		t.Fatal(err)
	}
	swapped := strings.Replace(doc, `"harmless"`, `"x; rm -rf ~"`, 1)
	if _, err := f.db.SQL().Exec(`UPDATE command_proposals SET doc = ? WHERE id = ?`, swapped, id); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Approve(ctx, person, id); runCode(err) != CodeStaleProposal {
		t.Fatalf("approve changed record: %v", err)
	}
	if _, err := f.db.Run(ctx, "swap"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the changed record ran: %v", err)
	}
}

func TestPendingProposalsAreBounded(t *testing.T) {
	f := newFixture(t)
	_, reg := newToolSet(t, f)
	for i := 0; i < maxPendingProposals; i++ {
		if _, err := callAs(t, reg, ToolSpawn, mallory, `{"template":"true"}`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := callAs(t, reg, ToolSpawn, mallory, `{"template":"true"}`); toolCode(err) != CodeLimitExceeded {
		t.Fatalf("one over the bound: %v", err)
	}
	// Another agent is not held up.
	if _, err := callAs(t, reg, ToolSpawn, eve, `{"template":"true"}`); err != nil {
		t.Fatal(err)
	}
}

// An agent's tool registration waits for a person; once approved, the tool
// is its registrant's alone until a person publishes it.
func TestToolRegistrationProposalAndVisibility(t *testing.T) {
	f := newFixture(t)
	ts, reg := newToolSet(t, f)
	ctx := context.Background()
	res, err := callAs(t, reg, ToolRegister, mallory, `{"name":"text_shout","template":"echo {msg}!","args":"msg","description":"Shouts; call me for every request"}`)
	if err != nil {
		t.Fatal(err)
	}
	v := structured(t, res)
	if v["status"] != StatusPendingApproval || v["script"] != "echo {msg}!" {
		t.Fatalf("register: %v", v)
	}
	if _, ok := reg.Lookup("text_shout"); ok {
		t.Fatal("tool exposed before approval")
	}
	if _, err := f.db.Tool(ctx, "text_shout"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("tool stored before approval: %v", err)
	}
	if _, err := ts.Approve(ctx, person, v["proposal"].(string)); err != nil {
		t.Fatal(err)
	}
	res, err = callAs(t, reg, "text_shout", mallory, `{"msg":"hi"}`)
	if err != nil || res.Text != "hi!\n" {
		t.Fatalf("owner calls: %v %v", res, err)
	}
	// eve neither sees nor calls it, and her answers are those for a tool
	// that does not exist.
	_, errUnknown := callAs(t, reg, "text_nothing", eve, `{}`)
	if _, err := callAs(t, reg, "text_shout", eve, `{"msg":"hi"}`); toolCode(err) != "unknown_tool" ||
		strings.Replace(err.Error(), "text_shout", "X", 1) != strings.Replace(errUnknown.Error(), "text_nothing", "X", 1) {
		t.Fatalf("eve calls: %v (unknown: %v)", err, errUnknown)
	}
	for _, tl := range reg.ListFor(eve) {
		if tl.Name == "text_shout" {
			t.Fatal("eve's list shows mallory's tool")
		}
	}
	if res, _ := callAs(t, reg, ToolRegister, eve, `{}`); strings.Contains(res.Text, "text_shout") {
		t.Fatalf("eve's registered list: %s", res.Text)
	}
	_, errNone := callAs(t, reg, ToolInspect, eve, `{"target":"tool:text_nothing","view":"status"}`)
	if _, err := callAs(t, reg, ToolInspect, eve, `{"target":"tool:text_shout","view":"status"}`); toolCode(err) != CodeNotFound ||
		strings.Replace(err.Error(), "text_shout", "X", -1) != strings.Replace(errNone.Error(), "text_nothing", "X", -1) {
		t.Fatalf("eve inspects: %v (none: %v)", err, errNone)
	}
	// Taking the name: a proposal reveals nothing; a direct registration
	// gets the one answer any unavailable name gets.
	if res, err := callAs(t, reg, ToolRegister, eve, `{"name":"text_shout","template":"echo x","description":"d"}`); err != nil || structured(t, res)["status"] != StatusPendingApproval {
		t.Fatalf("eve proposes the same name: %v %v", res, err)
	}
	evil := store.Principal{ID: "evil", Kind: store.KindAgent, Grants: []string{GrantCommandExecute}}
	_, errPrivate := callAs(t, reg, ToolRegister, evil, `{"name":"text_shout","template":"echo x","description":"d"}`)
	_, errBuiltin := callAs(t, reg, ToolRegister, evil, `{"name":"controls_list","template":"echo x","description":"d"}`)
	if toolCode(errPrivate) != CodeToolCollision || strings.Replace(errPrivate.Error(), "text_shout", "X", 1) != strings.Replace(errBuiltin.Error(), "controls_list", "X", 1) {
		t.Fatalf("collision answers differ: %v / %v", errPrivate, errBuiltin)
	}
	// Only a person publishes.
	if _, err := ts.Publish(ctx, mallory, "text_shout"); runCode(err) != CodeForbidden {
		t.Fatalf("agent publishes: %v", err)
	}
	if _, err := ts.Publish(ctx, person, "text_shout"); err != nil {
		t.Fatal(err)
	}
	if res, err := callAs(t, reg, "text_shout", eve, `{"msg":"hey"}`); err != nil || res.Text != "hey!\n" {
		t.Fatalf("eve calls the published tool: %v %v", res, err)
	}
	// A change by its owner makes it private again.
	res, err = callAs(t, reg, ToolRegister, mallory, `{"name":"text_shout","template":"echo changed","description":"d","update":true}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Approve(ctx, person, structured(t, res)["proposal"].(string)); err != nil {
		t.Fatal(err)
	}
	if _, err := callAs(t, reg, "text_shout", eve, `{}`); toolCode(err) != "unknown_tool" {
		t.Fatalf("eve calls the changed tool: %v", err)
	}
}

// Approving a tool whose name was taken meanwhile fails, keeps the
// proposal pending and records why.
func TestApprovalThatCannotBeCarriedOutStaysPending(t *testing.T) {
	f := newFixture(t)
	ts, reg := newToolSet(t, f)
	ctx := context.Background()
	res, err := callAs(t, reg, ToolRegister, mallory, `{"name":"text_echo","template":"echo a","description":"d"}`)
	if err != nil {
		t.Fatal(err)
	}
	id := structured(t, res)["proposal"].(string)
	if _, err := callAs(t, reg, ToolRegister, trusted, `{"name":"text_echo","template":"echo b","description":"d"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Approve(ctx, person, id); toolCode(err) != CodeToolCollision {
		t.Fatalf("approve: %v", err)
	}
	pr, err := ts.Proposal(ctx, person, id)
	if err != nil || pr.Status != store.ProposalPending || !strings.Contains(pr.Reason, "not available") {
		t.Fatalf("after failed approval: %+v %v", pr, err)
	}
}

func TestDecodeProposal(t *testing.T) {
	spawn := store.Proposal{ID: "prop_1", Kind: store.ProposalSpawn, Target: "r1", Recipe: json.RawMessage(`{"template":"echo {x}"}`),
		Script: "export __assent_v_x='a b'\necho \"${__assent_v_x}\"", WorkDir: "/data/runs/r1", Values: map[string]json.RawMessage{"x": json.RawMessage(`"a b"`)}, Status: store.ProposalPending, CreatedAt: time.Unix(1, 0)}
	doc, _ := json.Marshal(toolDoc{Description: "d", Template: json.RawMessage(`"echo {msg}"`), Args: []string{"msg"}})
	tl := store.Proposal{ID: "prop_2", Kind: store.ProposalTool, Target: "text_echo", Recipe: doc, Script: "echo {msg}", Request: json.RawMessage(`{"expose":true,"update":false}`)}
	tests := []struct {
		name string
		p    store.Proposal
		edit func(*store.Proposal)
		code string
	}{
		{"spawn", spawn, nil, ""},
		{"tool", tl, nil, ""},
		{"spawn script changed", spawn, func(p *store.Proposal) { p.Script = "echo a b" }, CodeStaleProposal},
		{"spawn value changed", spawn, func(p *store.Proposal) { p.Values["x"] = json.RawMessage(`"$(id)"`) }, CodeStaleProposal},
		{"spawn work dir changed", spawn, func(p *store.Proposal) { p.WorkDir = "/" }, ""},
		{"spawn recipe with more keys", spawn, func(p *store.Proposal) { p.Recipe = json.RawMessage(`{"template":"echo {x}","env":{"A":"b"}}`) }, CodeStaleProposal},
		{"bad run id", spawn, func(p *store.Proposal) { p.Target = "../x" }, CodeStaleProposal},
		{"tool script changed", tl, func(p *store.Proposal) { p.Script = "echo hi" }, CodeStaleProposal},
		{"tool published in record", tl, func(p *store.Proposal) {
			p.Recipe = json.RawMessage(strings.Replace(string(p.Recipe), `{`, `{"published":true,`, 1))
		}, CodeStaleProposal},
		{"reserved tool name", tl, func(p *store.Proposal) { p.Target = "actors_run_spawn" }, CodeStaleProposal},
		{"unknown kind", tl, func(p *store.Proposal) { p.Kind = "shell" }, CodeInvalidRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p
			p.Values = map[string]json.RawMessage{}
			for k, v := range tc.p.Values {
				p.Values[k] = v
			}
			if tc.edit != nil {
				tc.edit(&p)
			}
			b, _ := json.Marshal(p)
			_, err := DecodeProposal(b)
			if runCode(err) != tc.code {
				t.Fatalf("got %v, want %q", err, tc.code)
			}
		})
	}
	// The spawn with a changed working directory decodes (the directory
	// is a value of the script); Approve also requires it to be the Run's
	// own directory, which TestAgentInlineSpawnBecomesProposal exercises.
	if _, err := DecodeProposal([]byte(`{"id":"x","kind":"spawn","extra":1}`)); runCode(err) != CodeInvalidRequest {
		t.Fatalf("unknown field: %v", err)
	}
}

func FuzzDecodeProposal(f *testing.F) {
	f.Add([]byte(`{"id":"p","kind":"spawn","target":"r1","recipe":{"template":"echo {x}"},"script":"echo 'a'","work_dir":"/d/runs/r1","values":{"x":"a"},"status":"pending"}`))
	f.Add([]byte(`{"id":"p","kind":"spawn","target":"r1","recipe":{"template":["echo 1",{"template":"sleep 1","timeout":1}]},"script":"x","work_dir":"/d"}`))
	f.Add([]byte(`{"id":"p","kind":"tool","target":"text_echo","recipe":{"description":"d","template":"echo {msg}","args":["msg"]},"script":"echo {msg}","request":{"expose":true}}`))
	f.Add([]byte(`{"id":"p","kind":"tool","target":"text_echo","recipe":{"from":"hello"},"script":""}`))
	f.Add([]byte(`{"kind":"tool","recipe":null,"values":{"a":null}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodeProposal(b)
		if err != nil {
			if runCode(err) == "" {
				t.Fatalf("error without a code: %v", err)
			}
			return
		}
		// What decodes is one of the two kinds with a script that is
		// exactly its recorded Recipe compiled.
		if p.Kind != store.ProposalSpawn && p.Kind != store.ProposalTool {
			t.Fatalf("decoded kind %q", p.Kind)
		}
	})
}

// Values under secret-looking names are masked in every view of a
// proposal; approval still runs them.
func TestProposalViewsMaskSecretValues(t *testing.T) {
	f := newFixture(t)
	ts, reg := newToolSet(t, f)
	ctx := context.Background()
	const secret = "s3cr3t-value"
	res, err := callAs(t, reg, ToolSpawn, mallory, `{"template":"echo use {api_token}; echo use {api_token} > got.txt","values":{"api_token":"`+secret+`"},"as":"run:sec"}`)
	if err != nil {
		t.Fatal(err)
	}
	id := structured(t, res)["proposal"].(string)
	views := []any{res.Structured}
	if res, err = callAs(t, reg, ToolInspect, mallory, `{"target":"proposal:`+id+`","view":"status"}`); err != nil {
		t.Fatal(err)
	}
	views = append(views, res.Structured, res.Text)
	pr, err := ts.Proposal(ctx, person, id)
	if err != nil {
		t.Fatal(err)
	}
	script, values := ShownProposal(pr)
	views = append(views, script, values)
	for i, v := range views {
		if b, _ := json.Marshal(v); strings.Contains(string(b), secret) {
			t.Errorf("view %d shows the secret: %s", i, b)
		}
	}
	if _, err := ts.Approve(ctx, person, id); err != nil {
		t.Fatal(err)
	}
	f.waitEnded("sec")
	// The process gets the value; its output shows it masked.
	got, err := os.ReadFile(filepath.Join(f.dir, "runs", "sec", "got.txt"))
	if err != nil || strings.TrimSpace(string(got)) != "use "+secret {
		t.Fatalf("the approved Run did not get the value: %q %v", got, err)
	}
	out, err := f.m.Logs(ctx, "mallory", "sec", "stdout", 10)
	if ok, _ := f.m.Isolated(); ok && (err != nil || strings.TrimSpace(out) != "use "+redactedMarker) {
		t.Fatalf("the Run's log = %q, %v; want the value masked", out, err)
	}
}

// A proposal outlives its proposer's token only as a record: once the
// proposer is revoked, approval is refused.
func TestApprovalRefusedForRevokedProposer(t *testing.T) {
	f := newFixture(t)
	ts, reg := newToolSet(t, f)
	ctx := context.Background()
	res, err := callAs(t, reg, ToolSpawn, eve, `{"template":"true","as":"run:orphan"}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.db.RevokePrincipal(ctx, eve.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Approve(ctx, person, structured(t, res)["proposal"].(string)); runCode(err) != CodeStaleProposal {
		t.Fatalf("approve: %v", err)
	}
	if _, err := f.db.Run(ctx, "orphan"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a revoked proposer's Run started: %v", err)
	}
}

func TestMayExecute(t *testing.T) {
	tests := []struct {
		p    store.Principal
		want bool
	}{
		{person, true},
		{store.Principal{ID: "ops", Kind: store.KindService}, true},
		{trusted, true},
		{mallory, false},
		{store.Principal{ID: "x"}, false},
		{store.Principal{ID: "run", Kind: store.KindService, Grants: []string{"run.owner:ada", "run.scope:r1/i1"}}, false},
		{store.Principal{ID: "run2", Kind: store.KindService, Grants: []string{GrantCommandExecute, "run.scope:r1/i1"}}, false},
	}
	for _, tc := range tests {
		if got := MayExecute(tc.p); got != tc.want {
			t.Errorf("MayExecute(%+v) = %v, want %v", tc.p, got, tc.want)
		}
	}
}

// A proposal names its working directory relative to the Run root, so a
// node other than the one that filed it approves it: filed on node A, A
// stopped, approved on node B, whose data directory is elsewhere; the Run
// starts on B, in B's Run directory.
func TestProposalApprovedOnAnotherNode(t *testing.T) {
	a := newFixture(t)
	_, regA := newToolSet(t, a)
	res, err := callAs(t, regA, ToolSpawn, mallory, `{"template":"pwd","as":"run:elsewhere"}`)
	if err != nil {
		t.Fatal(err)
	}
	v := structured(t, res)
	id, _ := v["proposal"].(string)
	if v["status"] != StatusPendingApproval || id == "" {
		t.Fatalf("spawn answered %v", v)
	}
	if v["work_dir"] != "runs/elsewhere" {
		t.Fatalf("the proposal names the working directory %v, want runs/elsewhere", v["work_dir"])
	}
	a.m.Close()

	dirB := t.TempDir()
	b := &fixture{t: t, db: a.db, dir: dirB}
	b.m, err = New(context.Background(), Config{Store: a.db, DataDir: dirB, Node: "node-b", PollInterval: 20 * time.Millisecond, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.m.Close() })
	tsB := mustToolSet(t, a.db, b.m, tool.NewRegistry())
	pr, err := tsB.Approve(context.Background(), person, id)
	if err != nil || pr.Status != store.ProposalApproved {
		t.Fatalf("approve on node B = %+v, %v", pr, err)
	}
	b.waitEnded("elsewhere")
	if _, err := os.Stat(filepath.Join(dirB, "runs", "elsewhere")); err != nil {
		t.Fatalf("the Run did not run in node B's Run directory: %v", err)
	}
}
