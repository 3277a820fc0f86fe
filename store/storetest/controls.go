package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/store"
)

// testControls checks the store of the control registry: what each write
// leaves, the bounds of undo histories, concurrent writers on one control,
// a registry rebuilt from the store after a restart, the expectations a
// write checks, the reads of one control and one form, and registries
// sharing the store racing to decide one proposal.
func testControls(t *testing.T, open func(*testing.T) store.Store) {
	cases := []struct {
		name string
		test func(*testing.T, store.Controls)
	}{
		{"Updates", testControlUpdates},
		{"Forms", testControlForms},
		{"Refused", testControlRefused},
		{"ConcurrentPushes", testControlConcurrentPushes},
		{"Restart", testControlRestart},
		{"Expect", testControlExpect},
		{"LoadControl", testControlLoadOne},
		{"LoadForm", testControlLoadForm},
		{"RacingDecisions", testControlRacingDecisions},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.test(t, open(t).ControlRegistry()) })
	}
	t.Run("Audited", func(t *testing.T) { testControlAudited(t, open(t)) })
	t.Run("AuditedConcurrent", func(t *testing.T) { testControlAuditedConcurrent(t, open(t)) })
}

// listAudit returns every audit record of st.
func listAudit(t *testing.T, st store.Store) []store.AuditRecord {
	t.Helper()
	recs, err := st.Audit().ListAudit(ctx(t), store.AuditFilter{})
	if err != nil {
		t.Fatalf("ListAudit = %v", err)
	}
	return recs
}

// sameRecord reports whether got is want as the store keeps it.
func sameRecord(got, want store.AuditRecord) bool {
	return got.Seq == want.Seq && got.Time.Equal(want.Time) && got.PrincipalID == want.PrincipalID && got.Source == want.Source &&
		got.FormID == want.FormID && got.ControlID == want.ControlID && got.Subject == want.Subject &&
		got.Action == want.Action && got.OK == want.OK && got.Reason == want.Reason && got.Detail == want.Detail
}

// testControlAudited checks SaveControlAudited: a change and its audit
// record are saved together, in sequence with records appended alone, and
// a write that fails leaves neither.
func testControlAudited(t *testing.T, st store.Store) {
	ac := st.ControlRegistry()
	rec := func(n int, action string) store.AuditRecord {
		return store.AuditRecord{Time: at(time.Duration(n) * time.Second), PrincipalID: "p_a", Source: "agent", FormID: ctlRow.FormID,
			ControlID: ctlRow.ControlID, Subject: "order:7", Action: action, OK: true, Detail: fmt.Sprintf(`{"value":%d}`, n)}
	}
	stage := &control.SavedProposal{Revision: 4, Provenance: control.Provenance{Source: control.SourceAgent, PrincipalID: "p_a"},
		StagedAt: at(time.Second), Value: json.RawMessage(`5`), Base: json.RawMessage(`2`)}
	// The stage keeps its deadline in the same transaction.
	due := &store.DecisionDeadline{Kind: store.DeadlineControlProposal, Item: "orders/status@4", Due: at(time.Hour),
		CreatedAt: at(time.Second), EscalateTo: "leads"}
	steps := []struct {
		name string
		u    control.Update
		rec  store.AuditRecord
		dl   *store.DecisionDeadline
		// alone is appended with AppendAudit before the step.
		alone *store.AuditRecord
		check func(*control.SavedControl) bool
	}{
		{"stage", control.Update{Key: ctlRow, Stage: stage}, rec(1, "stage"), due, nil,
			func(c *control.SavedControl) bool {
				return c != nil && c.Proposal != nil && c.Proposal.Revision == 4 && len(c.History) == 0
			}},
		{"apply after a refusal", control.Update{Key: ctlRow, Unstage: true, Push: change(1), Depth: 3}, rec(3, "apply"), nil,
			&store.AuditRecord{Time: at(2 * time.Second), PrincipalID: "p_a", Source: "agent", FormID: ctlRow.FormID, ControlID: ctlRow.ControlID,
				Subject: "order:7", Action: "apply", Reason: "human_confirmation_required"},
			func(c *control.SavedControl) bool { return c != nil && c.Proposal == nil && len(c.History) == 1 }},
		{"undo", control.Update{Key: ctlRow, Pop: true}, rec(4, "undo"), nil, nil,
			func(c *control.SavedControl) bool { return c == nil || (c.Proposal == nil && len(c.History) == 0) }},
	}
	var want []store.AuditRecord
	for _, step := range steps {
		if step.alone != nil {
			seq, err := st.Audit().AppendAudit(ctx(t), *step.alone)
			if err != nil {
				t.Fatalf("%s: AppendAudit = %v", step.name, err)
			}
			r := *step.alone
			r.Seq = seq
			want = append(want, r)
		}
		seq, err := ac.SaveControlAudited(ctx(t), step.u, step.rec, step.dl)
		if err != nil {
			t.Fatalf("%s: SaveControlAudited = %v", step.name, err)
		}
		if len(want) > 0 && seq <= want[len(want)-1].Seq {
			t.Errorf("%s: sequence number %d after %d; they increase", step.name, seq, want[len(want)-1].Seq)
		}
		r := step.rec
		r.Seq = seq
		want = append(want, r)
		if got := savedOf(load(t, ac), ctlRow); !step.check(got) {
			t.Errorf("%s: saved state %+v", step.name, got)
		}
	}
	if s := load(t, ac); s.Revision != 4 {
		t.Errorf("revision = %d after an audited stage of revision 4", s.Revision)
	}
	if d, err := st.Deadlines().Deadline(ctx(t), due.Kind, due.Item); err != nil || !d.Due.Equal(due.Due) || d.EscalateTo != due.EscalateTo {
		t.Errorf("the stage's deadline read back as %+v, %v; want %+v", d, err, *due)
	}
	got := listAudit(t, st)
	if len(got) != len(want) {
		t.Fatalf("%d audit records, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if !sameRecord(got[i], want[i]) {
			t.Errorf("record %d read back as\n\t%+v\nwant\n\t%+v", i, got[i], want[i])
		}
	}

	// Writes that fail save neither the change nor the record.
	cancelled, cancel := context.WithCancel(ctx(t))
	cancel()
	unkept := &store.DecisionDeadline{Kind: store.DeadlineControlProposal, Item: "orders/name@4", Due: at(time.Hour), CreatedAt: at(time.Second)}
	expectAbsent := control.Update{Key: ctlName, Stage: stage, Expect: control.Expect{Proposal: true, Revision: 3}}
	failing := []struct {
		name string
		ctx  context.Context
		u    control.Update
		dl   *store.DecisionDeadline
	}{
		{"invalid update", ctx(t), control.Update{Key: ctlName, Stage: stage, Unstage: true}, unkept},
		{"push without depth", ctx(t), control.Update{Key: ctlName, Push: change(1)}, nil},
		{"cancelled", cancelled, control.Update{Key: ctlName, Stage: stage}, unkept},
		{"expectation fails", ctx(t), expectAbsent, unkept},
		{"invalid deadline", ctx(t), control.Update{Key: ctlName, Stage: stage}, &store.DecisionDeadline{Kind: store.DeadlineControlProposal}},
	}
	for _, tc := range failing {
		if _, err := ac.SaveControlAudited(tc.ctx, tc.u, rec(9, "stage"), tc.dl); err == nil {
			t.Errorf("%s: SaveControlAudited succeeded", tc.name)
		}
	}
	if _, err := st.Deadlines().Deadline(ctx(t), unkept.Kind, unkept.Item); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("failed writes kept their deadline: %v", err)
	}
	if c := savedOf(load(t, ac), ctlName); c != nil {
		t.Errorf("failed writes saved %+v", c)
	}
	if n := len(listAudit(t, st)); n != len(want) {
		t.Errorf("failed writes left %d audit records, want %d", n, len(want))
	}
}

// testControlAuditedConcurrent races audited writers on one control with
// records appended alone: every record lands once with its own sequence
// number, and the history's bound holds.
func testControlAuditedConcurrent(t *testing.T, st store.Store) {
	ac := st.ControlRegistry()
	const n, depth = 12, 5
	errs := race(n, func(i int) error {
		rec := store.AuditRecord{Time: at(time.Duration(i) * time.Second), PrincipalID: fmt.Sprint("w", i), Source: "user",
			FormID: ctlName.FormID, ControlID: ctlName.ControlID, Action: "apply", OK: i%3 != 0}
		if i%3 == 0 {
			_, err := st.Audit().AppendAudit(ctx(t), rec)
			return err
		}
		_, err := ac.SaveControlAudited(ctx(t), control.Update{Key: ctlName, Push: change(i + 1), Depth: depth}, rec, nil)
		return err
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("writer %d = %v", i, err)
		}
	}
	recs := listAudit(t, st)
	if len(recs) != n {
		t.Fatalf("%d audit records after %d writers", len(recs), n)
	}
	seen := map[string]bool{}
	pushes := 0
	for i, r := range recs {
		if i > 0 && r.Seq <= recs[i-1].Seq {
			t.Errorf("record %d has sequence number %d after %d", i, r.Seq, recs[i-1].Seq)
		}
		if seen[r.PrincipalID] {
			t.Errorf("the record of %s is saved twice", r.PrincipalID)
		}
		seen[r.PrincipalID] = true
		if r.OK {
			pushes++
		}
	}
	if got := savedOf(load(t, ac), ctlName); got == nil || len(got.History) != min(pushes, depth) {
		t.Errorf("after %d audited pushes on depth %d: %+v", pushes, depth, got)
	}
}

var (
	ctlName = control.Key{FormID: "profile", ControlID: "name"}
	ctlRow  = control.Key{FormID: "table", ControlID: "qty", HasSubject: true, SubjectType: "order", SubjectID: "7"}
)

func load(t *testing.T, c store.Controls) control.Saved {
	t.Helper()
	s, err := c.LoadControls(ctx(t))
	if err != nil {
		t.Fatalf("LoadControls = %v", err)
	}
	return s
}

func savedOf(s control.Saved, k control.Key) *control.SavedControl {
	for i := range s.Controls {
		if s.Controls[i].Key == k {
			return &s.Controls[i]
		}
	}
	return nil
}

func change(n int) *control.SavedChange {
	return &control.SavedChange{Action: control.Apply, Previous: json.RawMessage(fmt.Sprintf(`"v%d"`, n-1)),
		Applied: json.RawMessage(fmt.Sprintf(`"v%d"`, n)), Provenance: control.Provenance{Source: control.SourceUser, PrincipalID: "ada"},
		At: at(time.Duration(n) * time.Second)}
}

func save(t *testing.T, c store.Controls, u control.Update) {
	t.Helper()
	if err := c.SaveControl(ctx(t), u); err != nil {
		t.Fatalf("SaveControl(%+v) = %v", u, err)
	}
}

func testControlUpdates(t *testing.T, c store.Controls) {
	if s := load(t, c); s.Revision != 0 || len(s.Forms) != 0 || len(s.Controls) != 0 {
		t.Fatalf("an empty store holds %+v", s)
	}
	prop := &control.SavedProposal{Revision: 7, Provenance: control.Provenance{Source: control.SourceAgent, PrincipalID: "bot", SessionID: "s1"},
		StagedAt: at(time.Second), Why: "the customer asked by mail; <b>urgent</b>\nsee ticket 7", Value: json.RawMessage(`{"b": [1, 2.50],"a":"x"}`), Base: json.RawMessage(`null`)}
	save(t, c, control.Update{Key: ctlRow, Stage: prop})
	save(t, c, control.Update{Key: ctlName, Stage: &control.SavedProposal{Revision: 3, Provenance: control.Provenance{Source: control.SourceAgent},
		StagedAt: at(2 * time.Second), Value: json.RawMessage(`"Grace"`), Base: json.RawMessage(`"Ada"`)}})
	s := load(t, c)
	if s.Revision != 7 {
		t.Errorf("revision = %d after staging 7 then 3; it never goes down", s.Revision)
	}
	got := savedOf(s, ctlRow)
	if got == nil || got.Proposal == nil {
		t.Fatalf("the proposal of %v is not saved: %+v", ctlRow, s)
	}
	if p := got.Proposal; p.Revision != 7 || p.Provenance != prop.Provenance || !p.StagedAt.Equal(prop.StagedAt) || p.Why != prop.Why ||
		string(p.Value) != string(prop.Value) || string(p.Base) != "null" || len(got.History) != 0 {
		t.Errorf("proposal read back as %+v (%s), want %+v (%s) byte for byte", *p, p.Value, *prop, prop.Value)
	}

	// Ten applies on a history of depth 4 keep the newest four, oldest
	// first; each apply closes the proposal.
	for n := 1; n <= 10; n++ {
		save(t, c, control.Update{Key: ctlName, Unstage: true, Push: change(n), Depth: 4})
	}
	s = load(t, c)
	got = savedOf(s, ctlName)
	if got == nil || got.Proposal != nil || len(got.History) != 4 {
		t.Fatalf("after ten applies on depth 4: %+v", got)
	}
	for i, e := range got.History {
		want := change(7 + i)
		if e.Action != want.Action || string(e.Previous) != string(want.Previous) || string(e.Applied) != string(want.Applied) ||
			e.Provenance != want.Provenance || !e.At.Equal(want.At) {
			t.Errorf("history[%d] = %+v, want %+v", i, e, want)
		}
	}
	// Pop removes the newest; a lower depth trims at the next push.
	save(t, c, control.Update{Key: ctlName, Pop: true})
	save(t, c, control.Update{Key: ctlName, Push: change(11), Depth: 2})
	got = savedOf(load(t, c), ctlName)
	if got == nil || len(got.History) != 2 || string(got.History[0].Applied) != `"v9"` || string(got.History[1].Applied) != `"v11"` {
		t.Errorf("after pop and a push at depth 2: %+v", got)
	}
	// Popping an empty history, unstaging nothing: no error.
	save(t, c, control.Update{Key: ctlRow, Pop: true, Unstage: true})
	if got := savedOf(load(t, c), ctlRow); got != nil && (got.Proposal != nil || len(got.History) != 0) {
		t.Errorf("after unstage %v still holds %+v", ctlRow, got)
	}
	// A value for a control of no hosted form is ignored.
	save(t, c, control.Update{Key: ctlRow, Value: json.RawMessage(`5`)})
	if s := load(t, c); len(s.Forms) != 0 {
		t.Errorf("a value update created a form: %+v", s.Forms)
	}
	if err := c.ForgetControl(ctx(t), ctlName); err != nil {
		t.Fatal(err)
	}
	if got := savedOf(load(t, c), ctlName); got != nil && (got.Proposal != nil || len(got.History) != 0) {
		t.Errorf("a forgotten control holds %+v", got)
	}
	if err := c.ForgetControl(ctx(t), ctlName); err != nil {
		t.Errorf("forgetting twice = %v", err)
	}
	if s := load(t, c); s.Revision != 7 {
		t.Errorf("revision = %d after forgetting; it is kept", s.Revision)
	}
}

func hostedForm(id, owner string, values ...string) control.SavedForm {
	f := control.SavedForm{FormID: id, Owner: owner}
	for i, v := range values {
		k := control.Key{FormID: id, ControlID: fmt.Sprintf("c%d", i)}
		f.Controls = append(f.Controls, control.SavedHosted{Key: k, Spec: json.RawMessage(fmt.Sprintf(`{"identity":{"formId":%q,"controlId":"c%d"}}`, id, i)), Value: json.RawMessage(v)})
	}
	return f
}

func testControlForms(t *testing.T, c store.Controls) {
	b := hostedForm("b", "svc1", `"x"`, `1`)
	b.Private = true
	a := hostedForm("a", "svc2", `true`)
	for _, f := range []control.SavedForm{b, a} {
		if err := c.SaveForm(ctx(t), f); err != nil {
			t.Fatalf("SaveForm(%s) = %v", f.FormID, err)
		}
	}
	c0 := b.Controls[0].Key
	c1 := b.Controls[1].Key
	save(t, c, control.Update{Key: c0, Stage: &control.SavedProposal{Revision: 1, StagedAt: epoch, Value: json.RawMessage(`"y"`), Base: json.RawMessage(`"x"`)}})
	save(t, c, control.Update{Key: c1, Push: change(1), Depth: 10, Value: json.RawMessage(`2`)})

	s := load(t, c)
	if len(s.Forms) != 2 || s.Forms[0].FormID != "b" || s.Forms[1].FormID != "a" {
		t.Fatalf("forms = %+v, want b then a (the order first saved)", s.Forms)
	}
	if f := s.Forms[0]; f.Owner != "svc1" || !f.Private || len(f.Controls) != 2 || f.Controls[0].Key != c0 ||
		string(f.Controls[0].Spec) != string(b.Controls[0].Spec) || string(f.Controls[0].Value) != `"x"` || string(f.Controls[1].Value) != `2` {
		t.Errorf("form b read back as %+v", f)
	}
	// Redeclaring b without c1 drops c1's history, keeps c0's proposal and
	// b's place in the order.
	b2 := hostedForm("b", "svc1", `"z"`)
	if err := c.SaveForm(ctx(t), b2); err != nil {
		t.Fatal(err)
	}
	s = load(t, c)
	if len(s.Forms) != 2 || s.Forms[0].FormID != "b" || len(s.Forms[0].Controls) != 1 || s.Forms[0].Private || string(s.Forms[0].Controls[0].Value) != `"z"` {
		t.Errorf("after redeclaring b: %+v", s.Forms)
	}
	if got := savedOf(s, c1); got != nil && len(got.History) != 0 {
		t.Errorf("a control left out of its form keeps its history: %+v", got)
	}
	if got := savedOf(s, c0); got == nil || got.Proposal == nil {
		t.Errorf("a control kept in its form lost its proposal")
	}
	if err := c.DeleteForm(ctx(t), "b"); err != nil {
		t.Fatal(err)
	}
	s = load(t, c)
	if len(s.Forms) != 1 || s.Forms[0].FormID != "a" {
		t.Errorf("after deleting b: %+v", s.Forms)
	}
	if got := savedOf(s, c0); got != nil && got.Proposal != nil {
		t.Errorf("a deleted form's control keeps its proposal")
	}
	if err := c.DeleteForm(ctx(t), "nothing"); err != nil {
		t.Errorf("deleting an unknown form = %v", err)
	}
}

func testControlRefused(t *testing.T, c store.Controls) {
	p := &control.SavedProposal{Revision: 1, StagedAt: epoch, Value: json.RawMessage(`1`), Base: json.RawMessage(`0`)}
	updates := []struct {
		name string
		u    control.Update
	}{
		{"no form", control.Update{Key: control.Key{ControlID: "x"}, Unstage: true}},
		{"stage and unstage", control.Update{Key: ctlName, Stage: p, Unstage: true}},
		{"push and pop", control.Update{Key: ctlName, Push: change(1), Pop: true, Depth: 3}},
		{"push without depth", control.Update{Key: ctlName, Push: change(1)}},
	}
	for _, tc := range updates {
		if err := c.SaveControl(ctx(t), tc.u); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: SaveControl = %v, want ErrInvalid", tc.name, err)
		}
	}
	forms := []struct {
		name string
		f    control.SavedForm
	}{
		{"no id", control.SavedForm{}},
		{"foreign control", control.SavedForm{FormID: "f", Controls: []control.SavedHosted{{Key: control.Key{FormID: "g", ControlID: "x"}}}}},
		{"twice", control.SavedForm{FormID: "f", Controls: []control.SavedHosted{{Key: control.Key{FormID: "f", ControlID: "x"}}, {Key: control.Key{FormID: "f", ControlID: "x"}}}}},
	}
	for _, tc := range forms {
		if err := c.SaveForm(ctx(t), tc.f); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: SaveForm = %v, want ErrInvalid", tc.name, err)
		}
	}
	if s := load(t, c); len(s.Forms) != 0 || len(s.Controls) != 0 || s.Revision != 0 {
		t.Errorf("refused writes left %+v", s)
	}
}

// testControlConcurrentPushes races writers on one control's history, as
// nodes sharing a store may: every push lands and the bound holds.
func testControlConcurrentPushes(t *testing.T, c store.Controls) {
	const n, depth = 12, 8
	errs := race(n, func(i int) error {
		return c.SaveControl(ctx(t), control.Update{Key: ctlName, Push: change(i + 1), Depth: depth})
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("push %d = %v", i, err)
		}
	}
	got := savedOf(load(t, c), ctlName)
	if got == nil || len(got.History) != depth {
		t.Fatalf("after %d concurrent pushes on depth %d: %+v", n, depth, got)
	}
	seen := map[string]bool{}
	for _, e := range got.History {
		if seen[string(e.Applied)] {
			t.Errorf("entry %s saved twice", e.Applied)
		}
		seen[string(e.Applied)] = true
	}
}

// testControlRestart runs a registry on the store, then builds a new one
// from it: the same proposals (ids, revisions, provenance, staleness) are
// there and decidable, undo still works, revisions are not reused.
func testControlRestart(t *testing.T, c store.Controls) {
	clock := epoch
	now := func() time.Time { clock = clock.Add(time.Second); return clock }
	person := control.CommandContext{Source: control.SourceUser, Confirmed: true, PrincipalID: "ada"}
	agent := control.CommandContext{Source: control.SourceAgent, PrincipalID: "bot", SessionID: "mcp-1"}
	name := control.Identity{FormID: "profile", ControlID: "name"}
	age := control.Identity{FormID: "profile", ControlID: "age"}
	qty := control.Identity{FormID: "scr_1", ControlID: "qty", Subject: &control.Subject{Type: "order", ID: "7", Label: "Order 7"}}
	form := control.HostedForm{FormID: "profile", Owner: "svc", Controls: []control.HostedControl{
		{Identity: control.Identity{ControlID: "name"}, Metadata: control.Metadata{Kind: control.KindText, Label: "Name"}, Value: "Ada"},
		{Identity: control.Identity{ControlID: "age"}, Metadata: control.Metadata{Kind: control.KindNumber, Label: "Age"}, Value: 36},
	}}
	exec := func(r *control.Registry, cmd control.Command, cc control.CommandContext, want control.Reason) control.Result {
		t.Helper()
		res := r.Execute(ctx(t), cmd, cc)
		if res.Reason != want {
			t.Fatalf("%s %s = %q (%s), want %q", cmd.Action, cmd.Identity, res.Reason, res.Message, want)
		}
		return res
	}

	a := control.New(control.Config{Store: c, Now: now})
	if _, err := a.Restore(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := a.Host(ctx(t), form); err != nil {
		t.Fatal(err)
	}
	qtyValue := control.NewValue(2.0)
	if _, err := a.Register(control.Registration{Identity: qty, Metadata: control.Metadata{Kind: control.KindNumber}, Handles: qtyValue.Handles()}); err != nil {
		t.Fatal(err)
	}
	exec(a, control.Command{Action: control.Apply, Identity: name, Value: "Grace"}, person, "")
	exec(a, control.Command{Action: control.Stage, Identity: name, Value: "Ada L."}, agent, "")
	exec(a, control.Command{Action: control.Stage, Identity: age, Value: 37}, agent, "")
	exec(a, control.Command{Action: control.Stage, Identity: qty, Value: 5}, agent, "")
	if err := a.SetHostedValue(ctx(t), age, 40); err != nil {
		t.Fatal(err)
	}
	before := a.Proposals(ctx(t), "")
	if len(before) != 3 {
		t.Fatalf("%d proposals before the restart, want 3", len(before))
	}
	a.Close()

	b := control.New(control.Config{Store: c, Now: now})
	forms, err := b.Restore(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(forms) != 1 || forms[0].Owner != "svc" || len(forms[0].Controls) != 2 || forms[0].Controls[0].Value != "Grace" || !control.Equal(forms[0].Controls[1].Value, 40) {
		t.Fatalf("restored forms = %+v", forms)
	}
	qtyValue2 := control.NewValue(2.0)
	if _, err := b.Register(control.Registration{Identity: qty, Metadata: control.Metadata{Kind: control.KindNumber}, Handles: qtyValue2.Handles()}); err != nil {
		t.Fatal(err)
	}
	after := b.Proposals(ctx(t), "")
	if len(after) != len(before) {
		t.Fatalf("%d proposals after the restart, want %d", len(after), len(before))
	}
	var highest int64
	for _, want := range before {
		i := slices.IndexFunc(after, func(s control.Snapshot) bool { return s.Identity.Equal(want.Identity) })
		if i < 0 {
			t.Fatalf("the proposal for %s is gone", want.Identity)
		}
		got := after[i].State
		if *got.Staged != *want.State.Staged || !control.Equal(got.StagedValue, want.State.StagedValue) {
			t.Errorf("%s: %+v (%v) after the restart, want %+v (%v)", want.Identity, *got.Staged, got.StagedValue, *want.State.Staged, want.State.StagedValue)
		}
		highest = max(highest, want.State.Staged.Revision)
	}
	revOf := func(id control.Identity) int64 {
		i := slices.IndexFunc(after, func(s control.Snapshot) bool { return s.Identity.Equal(id) })
		return after[i].State.Staged.Revision
	}
	exec(b, control.Command{Action: control.Apply, Identity: age, Revision: revOf(age)}, person, control.ReasonStagedValueStale)
	exec(b, control.Command{Action: control.Apply, Identity: qty, Revision: revOf(qty)}, person, "")
	if !control.Equal(qtyValue2.Load(), 5) {
		t.Errorf("qty = %v after applying the restored proposal, want 5", qtyValue2.Load())
	}
	exec(b, control.Command{Action: control.Discard, Identity: name, Revision: revOf(name)}, person, "")
	exec(b, control.Command{Action: control.Undo, Identity: name}, person, "")
	if snap, _ := b.Get(ctx(t), name); snap.State.Value != "Ada" {
		t.Errorf("name after undo = %v, want Ada", snap.State.Value)
	}
	res := exec(b, control.Command{Action: control.Stage, Identity: age, Value: 41}, agent, "")
	if res.Snapshot.State.Staged.Revision <= highest {
		t.Errorf("revision %d after the restart reuses one up to %d", res.Snapshot.State.Staged.Revision, highest)
	}

	// A third registry sees the second one's decisions.
	c3 := control.New(control.Config{Store: c})
	if _, err := c3.Restore(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if ch := c3.Changes(ctx(t), "profile"); len(ch) != 0 {
		t.Errorf("changes after the undo = %+v, want none", ch)
	}
	props := c3.Proposals(ctx(t), "profile")
	if len(props) != 1 || !props[0].Identity.Equal(age) || !control.Equal(props[0].State.StagedValue, 41) || props[0].State.Staged.Stale {
		t.Errorf("third registry's proposals = %+v", props)
	}
}
