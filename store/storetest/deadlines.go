package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
)

func testDeadlines(t *testing.T, open func(*testing.T) store.Store) {
	t.Run("due in order, replaced, removed", func(t *testing.T) {
		d := open(t).Deadlines()
		for i, x := range []store.DecisionDeadline{
			{Kind: store.DeadlineCommandProposal, Item: "prop_b", Due: at(2 * time.Minute), CreatedAt: epoch},
			{Kind: store.DeadlineCommandProposal, Item: "prop_a", Due: at(time.Minute), CreatedAt: epoch},
			{Kind: store.DeadlineControlProposal, Item: "profile/plan@3", Due: at(90 * time.Second), CreatedAt: epoch},
			{Kind: store.DeadlineCommandProposal, Item: "prop_c", Due: at(time.Hour), CreatedAt: epoch},
		} {
			if err := d.SetDeadline(ctx(t), x); err != nil {
				t.Fatalf("set %d: %v", i, err)
			}
		}
		due, err := d.DueDeadlines(ctx(t), "", at(2*time.Minute), 10)
		if err != nil || len(due) != 3 || due[0].Item != "prop_a" || due[1].Item != "profile/plan@3" || due[2].Item != "prop_b" {
			t.Fatalf("due = %+v, %v; want prop_a, profile/plan@3, prop_b", due, err)
		}
		if !due[0].Due.Equal(at(time.Minute)) || !due[0].CreatedAt.Equal(epoch) {
			t.Errorf("times = %v %v", due[0].Due, due[0].CreatedAt)
		}
		if due, _ := d.DueDeadlines(ctx(t), store.DeadlineCommandProposal, at(2*time.Minute), 1); len(due) != 1 || due[0].Item != "prop_a" {
			t.Errorf("one of kind = %+v", due)
		}
		if due, _ := d.DueDeadlines(ctx(t), "", at(59*time.Second), 10); len(due) != 0 {
			t.Errorf("before any is due = %+v", due)
		}
		if err := d.SetDeadline(ctx(t), store.DecisionDeadline{Kind: store.DeadlineCommandProposal, Item: "prop_a", Due: at(3 * time.Hour), CreatedAt: epoch}); err != nil {
			t.Fatal(err)
		}
		if got, err := d.Deadline(ctx(t), store.DeadlineCommandProposal, "prop_a"); err != nil || !got.Due.Equal(at(3*time.Hour)) {
			t.Errorf("replaced = %+v, %v", got, err)
		}
		if err := d.DeleteDeadline(ctx(t), store.DeadlineCommandProposal, "prop_b"); err != nil {
			t.Fatal(err)
		}
		if err := d.DeleteDeadline(ctx(t), store.DeadlineCommandProposal, "prop_b"); err != nil {
			t.Errorf("delete again = %v, want nil", err)
		}
		if _, err := d.Deadline(ctx(t), store.DeadlineCommandProposal, "prop_b"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("deleted = %v, want ErrNotFound", err)
		}
	})
	t.Run("escalation moves the stage on once", func(t *testing.T) {
		d := open(t).Deadlines()
		x := store.DecisionDeadline{Kind: store.DeadlineCommandProposal, Item: "prop_e", Due: at(time.Minute), CreatedAt: epoch, EscalateTo: "finance"}
		if err := d.SetDeadline(ctx(t), x); err != nil {
			t.Fatal(err)
		}
		if got, err := d.Deadline(ctx(t), x.Kind, x.Item); err != nil || got.EscalateTo != "finance" || got.Stage != 0 || got.Escalated() {
			t.Fatalf("stored = %+v, %v; want group finance at stage 0", got, err)
		}
		// Nodes racing to escalate: exactly one moves it on.
		const racers = 8
		errs := make(chan error, racers)
		for range racers {
			go func() { errs <- d.AdvanceDeadline(ctx(t), x.Kind, x.Item, 0, at(2*time.Minute)) }()
		}
		won := 0
		for range racers {
			switch err := <-errs; {
			case err == nil:
				won++
			case !errors.Is(err, store.ErrConflict):
				t.Errorf("losing advance = %v, want ErrConflict", err)
			}
		}
		if won != 1 {
			t.Errorf("%d advances won, want 1", won)
		}
		got, err := d.Deadline(ctx(t), x.Kind, x.Item)
		if err != nil || got.Stage != 1 || !got.Escalated() || !got.Due.Equal(at(2*time.Minute)) || got.EscalateTo != "finance" {
			t.Errorf("advanced = %+v, %v; want stage 1 due at 2m", got, err)
		}
		if due, err := d.DueDeadlines(ctx(t), x.Kind, at(90*time.Second), 10); err != nil || len(due) != 0 {
			t.Errorf("due before the new deadline = %+v, %v", due, err)
		}
		if due, err := d.DueDeadlines(ctx(t), x.Kind, at(2*time.Minute), 10); err != nil || len(due) != 1 || due[0].Stage != 1 || due[0].EscalateTo != "finance" {
			t.Errorf("due at the new deadline = %+v, %v", due, err)
		}
		if err := d.AdvanceDeadline(ctx(t), x.Kind, "prop_missing", 0, at(time.Hour)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("advance of a missing deadline = %v, want ErrNotFound", err)
		}
	})
	t.Run("bad deadlines are refused", func(t *testing.T) {
		d := open(t).Deadlines()
		for _, x := range []store.DecisionDeadline{
			{Item: "prop_a", Due: epoch},
			{Kind: store.DeadlineCommandProposal, Due: epoch},
			{Kind: store.DeadlineCommandProposal, Item: "prop_a"},
			{Kind: store.DeadlineCommandProposal, Item: "prop_a", Due: epoch, Stage: -1},
		} {
			if err := d.SetDeadline(ctx(t), x); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("set %+v = %v, want ErrInvalid", x, err)
			}
		}
		if due, err := d.DueDeadlines(ctx(t), "", at(time.Hour), 10); err != nil || len(due) != 0 {
			t.Errorf("refused sets stored %+v, %v", due, err)
		}
	})
}
