package control

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// check refuses u with ErrConflict when its expectation does not hold,
// as a Persister checks it in the transaction of the write.
func (m *memStore) check(u Update) error {
	e := u.Expect
	c := m.controls[u.Key]
	if e.Proposal {
		var rev int64
		if c != nil && c.Proposal != nil {
			rev = c.Proposal.Revision
		}
		if rev != e.Revision || (u.Stage != nil && u.Stage.Revision <= rev) {
			return fmt.Errorf("%w: the open proposal is %d, not %d", ErrConflict, rev, e.Revision)
		}
	}
	if e.Value != nil {
		if i := m.formOf(u.Key); i >= 0 {
			for _, h := range m.forms[i].Controls {
				if h.Key == u.Key && !EqualJSON(h.Value, e.Value) {
					return fmt.Errorf("%w: the value is %s, not %s", ErrConflict, h.Value, e.Value)
				}
			}
		}
	}
	if e.Undo {
		var newest SavedChange
		if c != nil && len(c.History) > 0 {
			newest = c.History[len(c.History)-1]
		}
		if !newest.At.Equal(e.UndoAt) {
			return fmt.Errorf("%w: the newest undo entry changed", ErrConflict)
		}
	}
	return nil
}

// twoNodes returns two registries sharing one store, as two nodes do,
// both hosting the profile form.
func twoNodes(t *testing.T) (a, b *Registry, st *memStore) {
	t.Helper()
	ctx := context.Background()
	st = newMemStore()
	clk := newClock()
	a = New(Config{Store: st, Now: clk.now})
	if err := a.Host(ctx, profileForm()); err != nil {
		t.Fatal(err)
	}
	b = New(Config{Store: st, Now: clk.now})
	if _, err := b.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	return a, b, st
}

// TestConflictRefused: a decision taken on a copy another registry made
// out of date is refused by the store; the registry reports the exact
// reason, changes nothing, and shows what the store holds.
func TestConflictRefused(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		// before runs on a (and b, after it has read the control) before
		// b's command.
		before func(t *testing.T, a, b *Registry)
		cmd    Command
		cc     CommandContext
		want   Reason
		// after checks b's copy once refused.
		value    any
		proposal any // staged value b shows, nil for none
		// again is the outcome of the same command run on b once more,
		// now that b shows what the store holds ("" for success). It is
		// decided on b's own copy, without a write the store refuses.
		again Reason
	}{
		{
			name: "apply of a proposal applied elsewhere",
			before: func(t *testing.T, a, b *Registry) {
				stageOn(t, a, b, "Grace")
				wantReason(t, exec(t, a, Command{Action: Apply, Identity: nameID}, person), "")
			},
			cmd: Command{Action: Apply, Identity: nameID}, cc: person, want: ReasonStaleRevision,
			value: "Grace",
			// The proposal is closed: there is nothing left to apply.
			again: ReasonNoStagedValue,
		},
		{
			name: "discard of a proposal replaced elsewhere",
			before: func(t *testing.T, a, b *Registry) {
				stageOn(t, a, b, "Grace")
				wantReason(t, exec(t, a, Command{Action: Stage, Identity: nameID, Value: "Hopper"}, agent), "")
			},
			cmd: Command{Action: Discard, Identity: nameID}, cc: person, want: ReasonStaleRevision,
			value: "Ada", proposal: "Hopper",
			// The discard now closes the proposal b shows.
			again: "",
		},
		{
			name: "stage over a proposal staged elsewhere",
			before: func(t *testing.T, a, b *Registry) {
				wantReason(t, exec(t, a, Command{Action: Stage, Identity: nameID, Value: "Grace"}, agent), "")
			},
			cmd: Command{Action: Stage, Identity: nameID, Value: "Lovelace"}, cc: agent, want: ReasonStaleRevision,
			value: "Ada", proposal: "Grace",
			// Staging again replaces the proposal b shows.
			again: "",
		},
		{
			name: "apply over a value edited elsewhere",
			before: func(t *testing.T, a, b *Registry) {
				stageOn(t, a, b, "Grace")
				if err := a.SetHostedValue(ctx, nameID, "Edited"); err != nil {
					t.Fatal(err)
				}
			},
			cmd: Command{Action: Apply, Identity: nameID}, cc: person, want: ReasonStagedValueStale,
			value: "Edited", proposal: "Grace",
			// b now knows the proposal predates the edit: still stale,
			// refused by b itself.
			again: ReasonStagedValueStale,
		},
		{
			name: "stage against a value edited elsewhere",
			before: func(t *testing.T, a, b *Registry) {
				if err := a.SetHostedValue(ctx, nameID, "Edited"); err != nil {
					t.Fatal(err)
				}
			},
			cmd: Command{Action: Stage, Identity: nameID, Value: "Grace"}, cc: agent, want: ReasonStagedValueStale,
			value: "Edited",
			// The proposal is now based on the edited value.
			again: "",
		},
		{
			name: "undo of a change undone elsewhere",
			before: func(t *testing.T, a, b *Registry) {
				wantReason(t, exec(t, a, Command{Action: Apply, Identity: nameID, Value: "Grace"}, person), "")
				if err := b.Refresh(ctx, nameID.Key()); err != nil {
					t.Fatal(err)
				}
				wantReason(t, exec(t, a, Command{Action: Undo, Identity: nameID}, person), "")
			},
			cmd: Command{Action: Undo, Identity: nameID}, cc: person, want: ReasonNothingToUndo,
			value: "Ada",
			// b's history is empty now: refused by b itself.
			again: ReasonNothingToUndo,
		},
		{
			name: "undo of a change followed by another elsewhere",
			before: func(t *testing.T, a, b *Registry) {
				wantReason(t, exec(t, a, Command{Action: Apply, Identity: nameID, Value: "Grace"}, person), "")
				if err := b.Refresh(ctx, nameID.Key()); err != nil {
					t.Fatal(err)
				}
				wantReason(t, exec(t, a, Command{Action: Apply, Identity: nameID, Value: "Hopper"}, person), "")
			},
			cmd: Command{Action: Undo, Identity: nameID}, cc: person, want: ReasonStagedValueStale,
			value: "Hopper",
			// b now holds the newer change, which undo reverses.
			again: "",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b, st := twoNodes(t)
			tc.before(t, a, b)
			cs := &conflictCounter{memStore: st}
			b.store = cs
			saved := st.dump(t)
			res := exec(t, b, tc.cmd, tc.cc)
			wantReason(t, res, tc.want)
			if n := cs.conflicts.Load(); n != 1 {
				t.Fatalf("the store refused %d writes of the %s as conflicts, want 1: the case does not reach the store's check", n, tc.cmd.Action)
			}
			if got := st.dump(t); got != saved {
				t.Errorf("the refused %s changed the store:\n\t%s\nwas\n\t%s", tc.cmd.Action, got, saved)
			}
			snap, _ := b.Get(ctx, nameID)
			if !Equal(snap.State.Value, tc.value) {
				t.Errorf("b shows value %v after the refusal, want %v (the store's)", snap.State.Value, tc.value)
			}
			if !Equal(res.Snapshot.State.Value, tc.value) {
				t.Errorf("the refusal's snapshot shows value %v, want %v", res.Snapshot.State.Value, tc.value)
			}
			switch {
			case tc.proposal == nil && snap.State.Staged != nil:
				t.Errorf("b shows a proposal of %v; the store holds none", snap.State.StagedValue)
			case tc.proposal != nil && (snap.State.Staged == nil || !Equal(snap.State.StagedValue, tc.proposal)):
				t.Errorf("b shows proposal %v, want %v (the store's)", snap.State.StagedValue, tc.proposal)
			}
			// Once b shows what the store holds, the same decision is
			// taken on the store's state, not refused as a conflict.
			again := exec(t, b, tc.cmd, tc.cc)
			if again.OK != (tc.again == "") || again.Reason != tc.again {
				t.Errorf("the %s run again after b read the control: ok=%v reason=%q (%s), want reason %q",
					tc.cmd.Action, again.OK, again.Reason, again.Message, tc.again)
			}
			if n := cs.conflicts.Load(); n != 1 {
				t.Errorf("the %s run again was refused by the store as a conflict; b did not decide it on the store's state", tc.cmd.Action)
			}
			if tc.again != "" {
				if got := st.dump(t); got != saved {
					t.Errorf("the %s refused again changed the store:\n\t%s\nwas\n\t%s", tc.cmd.Action, got, saved)
				}
			}
		})
	}
}

// stageOn stages v for the name on a and has b read it.
func stageOn(t *testing.T, a, b *Registry, v any) {
	t.Helper()
	wantReason(t, exec(t, a, Command{Action: Stage, Identity: nameID, Value: v}, agent), "")
	if err := b.Refresh(context.Background(), nameID.Key()); err != nil {
		t.Fatal(err)
	}
}

// conflictCounter is a memStore that counts the control updates it
// refuses as conflicts.
type conflictCounter struct {
	*memStore
	conflicts atomic.Int64
}

func (c *conflictCounter) SaveControl(ctx context.Context, u Update) error {
	err := c.memStore.SaveControl(ctx, u)
	if errors.Is(err, ErrConflict) {
		c.conflicts.Add(1)
	}
	return err
}

// conflictStore refuses every control update with ErrConflict.
type conflictStore struct{ *memStore }

func (c conflictStore) SaveControl(context.Context, Update) error {
	return fmt.Errorf("save control: %w", ErrConflict)
}

// TestConflictRevertsWrite: when the store refuses an apply as a
// conflict, the value written to an application's own control is
// written back and nothing else changes.
func TestConflictRevertsWrite(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	r := New(Config{Store: st})
	v := NewValue("Ada")
	if _, err := r.Register(Registration{Identity: fieldID, Metadata: text("City"), Handles: v.Handles()}); err != nil {
		t.Fatal(err)
	}
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: fieldID, Value: "Paris"}, agent), "")
	r.store = conflictStore{st}
	for _, cmd := range []Command{
		{Action: Apply, Identity: fieldID},
		{Action: Apply, Identity: fieldID, Value: "Rome"},
		{Action: Clear, Identity: fieldID},
		{Action: Discard, Identity: fieldID},
	} {
		res := exec(t, r, cmd, person)
		if res.OK || (res.Reason != ReasonStaleRevision && res.Reason != ReasonStagedValueStale) {
			t.Errorf("%s = %s (%s), want a conflict reason", cmd.Action, res.Reason, res.Message)
		}
		if got := v.Load(); got != "Ada" {
			t.Errorf("after the refused %s the control holds %v, want Ada written back", cmd.Action, got)
		}
		snap, _ := r.Get(ctx, fieldID)
		if snap.State.Staged == nil || !Equal(snap.State.StagedValue, "Paris") {
			t.Errorf("after the refused %s the proposal is %+v, want Paris still staged", cmd.Action, snap.State.Staged)
		}
	}
}

// TestConcurrentDecisionsOneStore races two registries sharing a store
// applying one proposal: exactly one applies it, the other is refused
// with stale_revision, and both end up showing the applied value.
func TestConcurrentDecisionsOneStore(t *testing.T) {
	ctx := context.Background()
	for round := range 50 {
		a, b, _ := twoNodes(t)
		stageOn(t, a, b, fmt.Sprint("Grace ", round))
		var wg sync.WaitGroup
		results := make([]Result, 2)
		for i, r := range []*Registry{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = r.Execute(ctx, Command{Action: Apply, Identity: nameID}, person)
			}()
		}
		wg.Wait()
		ok, stale := 0, 0
		for _, res := range results {
			switch {
			case res.OK:
				ok++
			case res.Reason == ReasonStaleRevision:
				stale++
			default:
				t.Fatalf("round %d: apply = %s (%s)", round, res.Reason, res.Message)
			}
		}
		if ok != 1 || stale != 1 {
			t.Fatalf("round %d: %d applied and %d stale_revision, want one of each", round, ok, stale)
		}
		for _, r := range []*Registry{a, b} {
			if err := r.Refresh(ctx, nameID.Key()); err != nil {
				t.Fatal(err)
			}
			snap, _ := r.Get(ctx, nameID)
			if !Equal(snap.State.Value, fmt.Sprint("Grace ", round)) || snap.State.Staged != nil {
				t.Fatalf("round %d: a registry shows %+v after the race", round, snap.State)
			}
			if ch := r.Changes(ctx, "profile"); len(ch) != 1 {
				t.Fatalf("round %d: %d changes to undo, want the one apply", round, len(ch))
			}
		}
	}
}

// TestRefreshForm: a form hosted, redeclared or removed through one
// registry is hosted, replaced or removed in another sharing the store.
func TestRefreshForm(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	a := New(Config{Store: st})
	b := New(Config{Store: st})
	if err := a.Host(ctx, profileForm()); err != nil {
		t.Fatal(err)
	}
	wantReason(t, exec(t, a, Command{Action: Stage, Identity: nameID, Value: "Grace"}, agent), "")
	f, ok, err := b.RefreshForm(ctx, "profile")
	if err != nil || !ok || f.Owner != "svc" || len(f.Controls) != 2 {
		t.Fatalf("RefreshForm = %+v, %v, %v", f, ok, err)
	}
	props := b.Proposals(ctx, "profile")
	if len(props) != 1 || !Equal(props[0].State.StagedValue, "Grace") {
		t.Fatalf("b's proposals after RefreshForm = %+v", props)
	}
	// b decides on a's proposal; a stage on b gets a fresh revision.
	wantReason(t, exec(t, b, Command{Action: Apply, Identity: nameID, Revision: props[0].State.Staged.Revision}, person), "")

	// Redeclared without age: b drops it.
	short := profileForm()
	short.Controls = short.Controls[:1]
	short.Controls[0].Value = "Grace"
	if err := a.Host(ctx, short); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.RefreshForm(ctx, "profile"); err != nil || !ok {
		t.Fatalf("RefreshForm after redeclaring = %v, %v", ok, err)
	}
	if _, ok := b.Get(ctx, ageID); ok {
		t.Error("b still has age after the form was redeclared without it")
	}
	if ch := b.Changes(ctx, "profile"); len(ch) != 1 {
		t.Errorf("b lost the undo history of name: %+v", ch)
	}
	// Removed: b unhosts it.
	if _, err := a.Unhost(ctx, "profile"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.RefreshForm(ctx, "profile"); err != nil || ok {
		t.Fatalf("RefreshForm after removal = %v, %v", ok, err)
	}
	if got := b.HostedForms(); len(got) != 0 {
		t.Errorf("b hosts %+v after the form was removed", got)
	}
	if _, ok := b.Get(ctx, nameID); ok {
		t.Error("b still has name after the form was removed")
	}
	// Without a store it does nothing.
	if _, ok, err := New(Config{}).RefreshForm(ctx, "profile"); ok || err != nil {
		t.Errorf("RefreshForm without a store = %v, %v", ok, err)
	}
	st.setFail(errDown)
	var ce *Error
	if _, _, err := b.RefreshForm(ctx, "profile"); !errors.As(err, &ce) || ce.Reason != ReasonStoreUnavailable {
		t.Errorf("RefreshForm on a store that is down = %v", err)
	}
}
