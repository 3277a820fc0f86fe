package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/store"
)

// testControlExpect checks that a write's control.Expect is checked in its
// transaction: a write whose expectation holds applies, one whose
// expectation fails is refused with control.ErrConflict (and
// store.ErrConflict) and saves nothing.
func testControlExpect(t *testing.T, c store.Controls) {
	k := control.Key{FormID: "f", ControlID: "c0"}
	if err := c.SaveForm(ctx(t), hostedForm("f", "svc", `{"n": 1.0}`)); err != nil {
		t.Fatal(err)
	}
	prop := func(rev int64) *control.SavedProposal {
		return &control.SavedProposal{Revision: rev, StagedAt: at(time.Second), Why: fmt.Sprintf("reason %d", rev),
			Value: json.RawMessage(`"x"`), Base: json.RawMessage(`{"n":1}`)}
	}
	// The saved state: proposal 5 open, one undo entry made at 3s.
	save(t, c, control.Update{Key: k, Push: change(3), Depth: 10})
	save(t, c, control.Update{Key: k, Stage: prop(5)})
	newest := change(3).At

	steps := []struct {
		name string
		u    control.Update
		ok   bool
	}{
		{"no expectation", control.Update{Key: k, Value: json.RawMessage(`{"n":1}`)}, true},
		{"another proposal", control.Update{Key: k, Unstage: true, Expect: control.Expect{Proposal: true, Revision: 4}}, false},
		{"no proposal", control.Update{Key: k, Unstage: true, Expect: control.Expect{Proposal: true}}, false},
		{"stage not above the open proposal", control.Update{Key: k, Stage: prop(5), Expect: control.Expect{Proposal: true, Revision: 5}}, false},
		{"stage over another proposal", control.Update{Key: k, Stage: prop(6), Expect: control.Expect{Proposal: true, Revision: 4}}, false},
		{"stage expecting none open", control.Update{Key: k, Stage: prop(6), Expect: control.Expect{Proposal: true}}, false},
		{"stage against another value", control.Update{Key: k, Stage: prop(6), Expect: control.Expect{Proposal: true, Revision: 5, Value: json.RawMessage(`{"n":2}`)}}, false},
		{"another value", control.Update{Key: k, Unstage: true, Expect: control.Expect{Proposal: true, Revision: 5, Value: json.RawMessage(`{"n":2}`)}}, false},
		{"another newest undo entry", control.Update{Key: k, Pop: true, Expect: control.Expect{Undo: true, UndoAt: at(4 * time.Second)}}, false},
		{"an empty history", control.Update{Key: k, Pop: true, Expect: control.Expect{Undo: true}}, false},
		{"the same value, written otherwise", control.Update{Key: k, Stage: prop(6), Expect: control.Expect{Proposal: true, Revision: 5, Value: json.RawMessage(`{ "n" : 1 }`)}}, true},
		{"the proposal just staged", control.Update{Key: k, Unstage: true, Push: change(4), Depth: 10, Expect: control.Expect{Proposal: true, Revision: 6, Value: json.RawMessage(`{"n":1}`)}}, true},
		{"the proposal just closed", control.Update{Key: k, Unstage: true, Expect: control.Expect{Proposal: true, Revision: 6}}, false},
		{"the newest undo entry", control.Update{Key: k, Pop: true, Expect: control.Expect{Undo: true, UndoAt: change(4).At}}, true},
		{"the entry below it", control.Update{Key: k, Pop: true, Expect: control.Expect{Undo: true, UndoAt: newest}}, true},
		{"an emptied history", control.Update{Key: k, Stage: prop(7), Expect: control.Expect{Proposal: true, Undo: true}}, true},
		{"a value of a control of no form", control.Update{Key: ctlName, Stage: prop(8), Expect: control.Expect{Proposal: true, Value: json.RawMessage(`1`)}}, true},
	}
	for _, step := range steps {
		before := load(t, c)
		err := c.SaveControl(ctx(t), step.u)
		switch {
		case step.ok && err != nil:
			t.Fatalf("%s: SaveControl = %v, want it saved", step.name, err)
		case !step.ok && (!errors.Is(err, control.ErrConflict) || !errors.Is(err, store.ErrConflict)):
			t.Fatalf("%s: SaveControl = %v, want control.ErrConflict and store.ErrConflict", step.name, err)
		case !step.ok:
			if after := load(t, c); asJSON(t, after) != asJSON(t, before) {
				t.Fatalf("%s: a refused write changed the store:\n\t%+v\nwas\n\t%+v", step.name, after, before)
			}
		}
	}
	got := savedOf(load(t, c), k)
	if got == nil || got.Proposal == nil || got.Proposal.Revision != 7 || got.Proposal.Why != "reason 7" || len(got.History) != 0 {
		t.Errorf("after the steps: %+v, want proposal 7 and no history", got)
	}
}

// testControlLoadOne checks LoadControl: one control's proposal, history
// and hosted value, with the highest revision, as LoadControls shows them.
func testControlLoadOne(t *testing.T, c store.Controls) {
	f := hostedForm("f", "svc", `"x"`, `2`)
	if err := c.SaveForm(ctx(t), f); err != nil {
		t.Fatal(err)
	}
	c0, c1 := f.Controls[0].Key, f.Controls[1].Key
	p := &control.SavedProposal{Revision: 9, Provenance: control.Provenance{Source: control.SourceAgent, PrincipalID: "bot"},
		StagedAt: at(time.Second), Value: json.RawMessage(`"y"`), Base: json.RawMessage(`"x"`)}
	save(t, c, control.Update{Key: c0, Stage: p})
	save(t, c, control.Update{Key: c1, Push: change(1), Depth: 5, Value: json.RawMessage(`3`)})
	save(t, c, control.Update{Key: c1, Push: change(2), Depth: 5})
	save(t, c, control.Update{Key: ctlRow, Push: change(7), Depth: 5})

	all := load(t, c)
	cases := []struct {
		k      control.Key
		hosted bool
		value  string
	}{
		{c0, true, `"x"`},
		{c1, true, `3`},
		{ctlRow, false, ""},
		{control.Key{FormID: "f", ControlID: "none"}, false, ""},
		{control.Key{FormID: "table", ControlID: "qty", HasSubject: true, SubjectType: "order", SubjectID: "8"}, false, ""},
	}
	for _, tc := range cases {
		lc, err := c.LoadControl(ctx(t), tc.k)
		if err != nil {
			t.Fatalf("LoadControl(%v) = %v", tc.k, err)
		}
		want := control.SavedControl{Key: tc.k}
		if s := savedOf(all, tc.k); s != nil {
			want = *s
		}
		if lc.Revision != 9 || lc.Control.Key != tc.k || lc.Hosted != tc.hosted || string(lc.Value) != tc.value ||
			asJSON(t, lc.Control) != asJSON(t, want) {
			t.Errorf("LoadControl(%v) = %+v (value %s), want %+v (hosted %v, value %s)", tc.k, lc, lc.Value, want, tc.hosted, tc.value)
		}
	}
}

// testControlLoadForm checks LoadForm: one hosted form with the state of
// its controls, or nothing for a form not saved.
func testControlLoadForm(t *testing.T, c store.Controls) {
	for _, f := range []control.SavedForm{hostedForm("a", "svc1", `1`), hostedForm("b", "svc2", `"x"`, `true`)} {
		if err := c.SaveForm(ctx(t), f); err != nil {
			t.Fatal(err)
		}
	}
	b0 := control.Key{FormID: "b", ControlID: "c0"}
	save(t, c, control.Update{Key: b0, Stage: &control.SavedProposal{Revision: 4, StagedAt: at(time.Second), Value: json.RawMessage(`"y"`), Base: json.RawMessage(`"x"`)}})
	save(t, c, control.Update{Key: control.Key{FormID: "a", ControlID: "c0"}, Push: change(1), Depth: 3})

	s, err := c.LoadForm(ctx(t), "b")
	if err != nil {
		t.Fatal(err)
	}
	if s.Revision != 4 || len(s.Forms) != 1 || s.Forms[0].FormID != "b" || s.Forms[0].Owner != "svc2" || len(s.Forms[0].Controls) != 2 ||
		string(s.Forms[0].Controls[1].Value) != `true` {
		t.Errorf("LoadForm(b) = %+v", s)
	}
	if len(s.Controls) != 1 || s.Controls[0].Key != b0 || s.Controls[0].Proposal == nil || s.Controls[0].Proposal.Revision != 4 {
		t.Errorf("LoadForm(b) controls = %+v, want the proposal of c0 only", s.Controls)
	}
	s, err = c.LoadForm(ctx(t), "none")
	if err != nil || len(s.Forms) != 0 || len(s.Controls) != 0 || s.Revision != 4 {
		t.Errorf("LoadForm(none) = %+v, %v", s, err)
	}
}

// testControlRacingDecisions runs two registries on the store, as two
// nodes do, and has both apply one proposal at the same moment, many
// times: exactly one applies it and the other is refused with
// stale_revision, each time.
func testControlRacingDecisions(t *testing.T, c store.Controls) {
	person := control.CommandContext{Source: control.SourceUser, Confirmed: true, PrincipalID: "ada"}
	agent := control.CommandContext{Source: control.SourceAgent, PrincipalID: "bot"}
	id := control.Identity{FormID: "race", ControlID: "name"}
	form := control.HostedForm{FormID: "race", Owner: "svc", Controls: []control.HostedControl{
		{Identity: control.Identity{ControlID: "name"}, Metadata: control.Metadata{Kind: control.KindText}, Value: "Ada"},
	}}
	a := control.New(control.Config{Store: c})
	if err := a.Host(ctx(t), form); err != nil {
		t.Fatal(err)
	}
	b := control.New(control.Config{Store: c})
	if _, err := b.Restore(ctx(t)); err != nil {
		t.Fatal(err)
	}
	const rounds = 20
	for round := range rounds {
		value := fmt.Sprint("Grace ", round)
		if res := a.Execute(ctx(t), control.Command{Action: control.Stage, Identity: id, Value: value}, agent); !res.OK {
			t.Fatalf("round %d: stage = %s (%s)", round, res.Reason, res.Message)
		}
		if err := b.Refresh(ctx(t), id.Key()); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		results := make([]control.Result, 2)
		for i, r := range []*control.Registry{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = r.Execute(ctx(t), control.Command{Action: control.Apply, Identity: id}, person)
			}()
		}
		wg.Wait()
		ok, stale := 0, 0
		for _, res := range results {
			switch {
			case res.OK:
				ok++
			case res.Reason == control.ReasonStaleRevision:
				stale++
			default:
				t.Fatalf("round %d: apply = %s (%s)", round, res.Reason, res.Message)
			}
		}
		if ok != 1 || stale != 1 {
			t.Fatalf("round %d: %d applied and %d stale_revision, want one of each", round, ok, stale)
		}
		// Both show the store's state: applied, nothing staged.
		for _, r := range []*control.Registry{a, b} {
			if err := r.Refresh(ctx(t), id.Key()); err != nil {
				t.Fatal(err)
			}
			if snap, _ := r.Get(ctx(t), id); snap.State.Value != value || snap.State.Staged != nil {
				t.Fatalf("round %d: a registry shows %+v", round, snap.State)
			}
		}
		got := savedOf(load(t, c), id.Key())
		if got == nil || got.Proposal != nil || len(got.History) != min(round+1, control.DefaultHistoryDepth) {
			t.Fatalf("round %d: saved %+v, want no proposal and one undo entry per round", round, got)
		}
	}
}

// asJSON returns the JSON form of v, to compare saved states.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
