package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
)

func testAsks(t *testing.T, open func(*testing.T) store.Store) {
	st := open(t)
	q := st.Asks()
	ask := func(id, asker string, created time.Duration) store.Ask {
		return store.Ask{ID: id, Asker: asker, Question: "Pay invoice " + id + "?", Kind: store.AskYesNo,
			CreatedAt: at(created), State: store.AskOpen}
	}

	t.Run("create and read", func(t *testing.T) {
		a := store.Ask{ID: "ask_round", Asker: "p_round", Question: "Which account?\u202e", Options: []string{"Checking", "Savings"},
			Kind: store.AskChoice, Reason: "the invoice names none", Group: "finance", CreatedAt: at(time.Second), Deadline: at(24 * time.Hour),
			Fallback: "Savings", State: store.AskOpen}
		if err := q.CreateAsk(ctx(t), a, 0); err != nil {
			t.Fatal(err)
		}
		if err := q.CreateAsk(ctx(t), a, 0); !errors.Is(err, store.ErrConflict) {
			t.Errorf("second CreateAsk = %v, want ErrConflict", err)
		}
		got, err := q.Ask(ctx(t), a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Question != a.Question || !slices.Equal(got.Options, a.Options) || got.Kind != a.Kind || got.Reason != a.Reason || got.Group != a.Group ||
			!got.CreatedAt.Equal(a.CreatedAt) || !got.Deadline.Equal(a.Deadline) || got.Fallback != a.Fallback ||
			got.State != store.AskOpen || got.Answer != "" || got.DecidedBy != "" || !got.DecidedAt.IsZero() {
			t.Errorf("Ask = %+v, want %+v", got, a)
		}
		if _, err := q.Ask(ctx(t), "ask_none"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown question: %v, want ErrNotFound", err)
		}
		yn := ask("ask_nodeadline", "p_round", 2*time.Second)
		if err := q.CreateAsk(ctx(t), yn, 0); err != nil {
			t.Fatal(err)
		}
		if got, err := q.Ask(ctx(t), yn.ID); err != nil || !got.Deadline.IsZero() || got.Options != nil || got.Group != "" {
			t.Errorf("question without deadline or options read back as %+v, %v", got, err)
		}
	})

	t.Run("invalid", func(t *testing.T) {
		for _, a := range []store.Ask{
			{ID: "ask_bad1", Asker: "p", Kind: store.AskYesNo, State: store.AskOpen, CreatedAt: epoch},
			{ID: "ask_bad2", Asker: "p", Question: "?", Kind: "maybe", State: store.AskOpen, CreatedAt: epoch},
			{ID: "ask_bad3", Asker: "p", Question: "?", Kind: store.AskChoice, State: store.AskOpen, CreatedAt: epoch},
			{ID: "ask_bad4", Asker: "p", Question: "?", Kind: store.AskYesNo, State: store.AskAnswered, CreatedAt: epoch},
			{ID: "ask_bad5", Asker: "p", Question: "?", Kind: store.AskYesNo, State: store.AskOpen, Group: "Finance Team", CreatedAt: epoch},
		} {
			if err := q.CreateAsk(ctx(t), a, 0); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("CreateAsk(%+v) = %v, want ErrInvalid", a, err)
			}
		}
		if _, err := q.DecideAsk(ctx(t), "ask_round", store.AskDecision{State: store.AskAnswered, At: epoch}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("an answer without its text: %v, want ErrInvalid", err)
		}
		if a, _ := q.Ask(ctx(t), "ask_round"); a.State != store.AskOpen {
			t.Errorf("a refused decision changed the question: %+v", a)
		}
	})

	t.Run("open bound", func(t *testing.T) {
		for i := range 3 {
			if err := q.CreateAsk(ctx(t), ask(fmt.Sprintf("ask_b%d", i), "p_bound", time.Duration(10+i)*time.Second), 3); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.CreateAsk(ctx(t), ask("ask_b3", "p_bound", time.Minute), 3); !errors.Is(err, store.ErrTooManyAsks) {
			t.Errorf("fourth open question under a bound of 3: %v, want ErrTooManyAsks", err)
		}
		if err := q.CreateAsk(ctx(t), ask("ask_other", "p_other", time.Minute), 3); err != nil {
			t.Errorf("another asker's question: %v", err)
		}
		open, err := q.OpenAsks(ctx(t), "p_bound")
		if err != nil || len(open) != 3 || open[0].ID != "ask_b0" || open[2].ID != "ask_b2" {
			t.Fatalf("OpenAsks = %v, %v; want ask_b0..ask_b2 oldest first", open, err)
		}
		if _, err := q.DecideAsk(ctx(t), "ask_b1", store.AskDecision{State: store.AskDeclined, DecidedBy: "p_ada", At: at(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := q.CreateAsk(ctx(t), ask("ask_b3", "p_bound", time.Minute), 3); err != nil {
			t.Errorf("a question after one was decided: %v", err)
		}
		all, err := q.OpenAsks(ctx(t), "")
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, a := range all {
			ids[a.ID] = true
		}
		if !ids["ask_other"] || !ids["ask_b3"] || ids["ask_b1"] {
			t.Errorf("OpenAsks of everyone = %v", all)
		}
	})

	t.Run("concurrent askers stay within the bound", func(t *testing.T) {
		const n, bound = 12, 4
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = q.CreateAsk(ctx(t), ask(fmt.Sprintf("ask_c%02d", i), "p_crowd", time.Second), bound)
			}()
		}
		wg.Wait()
		made := 0
		for _, err := range errs {
			switch {
			case err == nil:
				made++
			case !errors.Is(err, store.ErrTooManyAsks):
				t.Errorf("CreateAsk: %v", err)
			}
		}
		if made != bound {
			t.Errorf("%d questions stored under a bound of %d", made, bound)
		}
	})

	t.Run("one decision wins", func(t *testing.T) {
		if err := q.CreateAsk(ctx(t), ask("ask_race", "p_race", time.Second), 0); err != nil {
			t.Fatal(err)
		}
		const n = 8
		var wg sync.WaitGroup
		type result struct {
			a   store.Ask
			err error
		}
		res := make([]result, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a, err := q.DecideAsk(ctx(t), "ask_race", store.AskDecision{State: store.AskAnswered, Answer: fmt.Sprint("yes", i),
					DecidedBy: fmt.Sprintf("p_person%d", i), Note: "ok", At: at(time.Minute)})
				res[i] = result{a, err}
			}()
		}
		wg.Wait()
		winner := ""
		for i, r := range res {
			if r.err == nil {
				if winner != "" {
					t.Fatalf("two decisions won: %s and %s", winner, r.a.DecidedBy)
				}
				winner = r.a.DecidedBy
				if r.a.State != store.AskAnswered || r.a.Answer != fmt.Sprint("yes", i) || !r.a.DecidedAt.Equal(at(time.Minute)) {
					t.Errorf("winner's question = %+v", r.a)
				}
			} else if !errors.Is(r.err, store.ErrConflict) {
				t.Errorf("losing decision: %v, want ErrConflict", r.err)
			}
		}
		if winner == "" {
			t.Fatal("no decision won")
		}
		for _, r := range res {
			if r.err != nil && r.a.DecidedBy != winner {
				t.Errorf("a loser was told %q decided, want %q", r.a.DecidedBy, winner)
			}
		}
		if _, err := q.DecideAsk(ctx(t), "ask_none", store.AskDecision{State: store.AskDeclined, At: epoch}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("deciding an unknown question: %v, want ErrNotFound", err)
		}
	})

	t.Run("answers towards a quorum", func(t *testing.T) {
		a := ask("ask_quorum", "p_quorum", time.Second)
		a.Quorum = 3
		if err := q.CreateAsk(ctx(t), a, 0); err != nil {
			t.Fatal(err)
		}
		if got, err := q.Ask(ctx(t), a.ID); err != nil || got.Quorum != 3 || got.Answers != nil {
			t.Fatalf("question with a quorum read back as %+v, %v", got, err)
		}
		one := []store.AskAnswer{{Person: "p_ada", Answer: "yes", At: at(time.Minute)}}
		got, err := q.AddAskAnswer(ctx(t), a.ID, one, nil)
		if err != nil || got.State != store.AskOpen || len(got.Answers) != 1 || got.Answers[0] != one[0] {
			t.Fatalf("first answer: %+v, %v", got, err)
		}
		// An answer read from the state before the first one is refused.
		if got, err := q.AddAskAnswer(ctx(t), a.ID, []store.AskAnswer{{Person: "p_ben", Answer: "yes", At: at(time.Minute)}}, nil); !errors.Is(err, store.ErrConflict) || len(got.Answers) != 1 {
			t.Fatalf("an answer on a stale count: %+v, %v; want ErrConflict and the stored answer", got, err)
		}
		for _, bad := range [][]store.AskAnswer{
			nil,
			{one[0], {Person: "p_ada", Answer: "no"}},
			{one[0], {Person: "p_ben"}},
		} {
			if _, err := q.AddAskAnswer(ctx(t), a.ID, bad, nil); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("answers %+v: %v, want ErrInvalid", bad, err)
			}
		}
		two := append(one, store.AskAnswer{Person: "p_ben", Answer: "yes", At: at(2 * time.Minute)})
		end := &store.AskDecision{State: store.AskAnswered, Answer: "yes", DecidedBy: "p_ben", At: at(2 * time.Minute)}
		got, err = q.AddAskAnswer(ctx(t), a.ID, two, end)
		if err != nil || got.State != store.AskAnswered || got.Answer != "yes" || got.DecidedBy != "p_ben" || len(got.Answers) != 2 {
			t.Fatalf("the answer that ends it: %+v, %v", got, err)
		}
		three := append(two, store.AskAnswer{Person: "p_cy", Answer: "yes", At: at(3 * time.Minute)})
		if _, err := q.AddAskAnswer(ctx(t), a.ID, three, nil); !errors.Is(err, store.ErrConflict) {
			t.Errorf("an answer after the end: %v, want ErrConflict", err)
		}
		if _, err := q.AddAskAnswer(ctx(t), "ask_none", one, nil); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("answering an unknown question: %v, want ErrNotFound", err)
		}
		bad := ask("ask_quorum_bad", "p_quorum", time.Second)
		bad.Quorum = store.MaxAskQuorum + 1
		if err := q.CreateAsk(ctx(t), bad, 0); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("a quorum over %d: %v, want ErrInvalid", store.MaxAskQuorum, err)
		}
	})

	t.Run("concurrent answers by different people count once each", func(t *testing.T) {
		a := ask("ask_quorum_race", "p_quorum", time.Second)
		a.Quorum = store.MaxAskQuorum
		if err := q.CreateAsk(ctx(t), a, 0); err != nil {
			t.Fatal(err)
		}
		// Each person reads, appends and retries on a conflict, as the
		// server does; every answer is kept once.
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				me := store.AskAnswer{Person: fmt.Sprintf("p_person%d", i), Answer: "yes", At: at(time.Minute)}
				for range 1000 {
					cur, err := q.Ask(ctx(t), a.ID)
					if err != nil {
						errs[i] = err
						return
					}
					_, err = q.AddAskAnswer(ctx(t), a.ID, append(slices.Clone(cur.Answers), me), nil)
					if !errors.Is(err, store.ErrConflict) {
						errs[i] = err
						return
					}
				}
				errs[i] = errors.New("never stored")
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("person %d: %v", i, err)
			}
		}
		got, err := q.Ask(ctx(t), a.ID)
		if err != nil || len(got.Answers) != n {
			t.Fatalf("after %d people answered at once: %d answers, %v", n, len(got.Answers), err)
		}
		seen := map[string]bool{}
		for _, v := range got.Answers {
			if seen[v.Person] {
				t.Errorf("%s counted twice", v.Person)
			}
			seen[v.Person] = true
		}
	})

	t.Run("due", func(t *testing.T) {
		for i, d := range []time.Duration{3 * time.Hour, 2 * time.Hour, 5 * time.Hour} {
			a := ask(fmt.Sprintf("ask_due%d", i), "p_due", 0)
			a.Deadline, a.Fallback = at(d), "decline"
			if err := q.CreateAsk(ctx(t), a, 0); err != nil {
				t.Fatal(err)
			}
		}
		due, err := q.DueAsks(ctx(t), at(3*time.Hour), 10)
		if err != nil || len(due) != 2 || due[0].ID != "ask_due1" || due[1].ID != "ask_due0" {
			t.Fatalf("DueAsks = %v, %v; want ask_due1, ask_due0", due, err)
		}
		if due, _ := q.DueAsks(ctx(t), at(3*time.Hour), 1); len(due) != 1 {
			t.Errorf("DueAsks with limit 1 returned %d", len(due))
		}
		if _, err := q.DecideAsk(ctx(t), "ask_due1", store.AskDecision{State: store.AskExpired, Note: "no decision before the deadline", At: at(3 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if due, _ := q.DueAsks(ctx(t), at(3*time.Hour), 10); len(due) != 1 || due[0].ID != "ask_due0" {
			t.Errorf("DueAsks after one expired = %v", due)
		}
		if a, _ := q.Ask(ctx(t), "ask_due1"); a.State != store.AskExpired || a.DecidedBy != "" || a.Note != "no decision before the deadline" {
			t.Errorf("expired question = %+v", a)
		}
	})

	t.Run("announce row iff the question is stored", func(t *testing.T) {
		// Clear what the cases above queued.
		queued, err := q.AsksToAnnounce(ctx(t), 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(queued) == 0 {
			t.Fatal("the questions stored above wait for no announcement")
		}
		var ids []string
		for _, a := range queued {
			ids = append(ids, a.ID)
		}
		if err := q.AnnouncedAsks(ctx(t), ids); err != nil {
			t.Fatal(err)
		}
		if left, err := q.AsksToAnnounce(ctx(t), 1000); err != nil || len(left) != 0 {
			t.Fatalf("after AnnouncedAsks, AsksToAnnounce = %v, %v; want none", left, err)
		}

		for i := range 2 {
			if err := q.CreateAsk(ctx(t), ask(fmt.Sprintf("ask_ann%d", i), "p_ann", time.Duration(20-i)*time.Second), 2); err != nil {
				t.Fatal(err)
			}
		}
		// Refused over the bound, and refused as a second write of a
		// stored id: neither leaves a row to announce.
		if err := q.CreateAsk(ctx(t), ask("ask_ann_over", "p_ann", time.Second), 2); !errors.Is(err, store.ErrTooManyAsks) {
			t.Fatalf("third question under a bound of 2: %v, want ErrTooManyAsks", err)
		}
		if err := q.CreateAsk(ctx(t), ask("ask_ann0", "p_other_ann", time.Second), 0); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("a stored id again: %v, want ErrConflict", err)
		}
		got, err := q.AsksToAnnounce(ctx(t), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].ID != "ask_ann1" || got[1].ID != "ask_ann0" || got[1].Asker != "p_ann" || got[0].Question == "" {
			t.Fatalf("AsksToAnnounce = %+v; want ask_ann1, ask_ann0, oldest first", got)
		}
		if one, _ := q.AsksToAnnounce(ctx(t), 1); len(one) != 1 {
			t.Errorf("AsksToAnnounce with limit 1 returned %d", len(one))
		}
		// A decided question still waits: the reader decides what to do.
		if _, err := q.DecideAsk(ctx(t), "ask_ann1", store.AskDecision{State: store.AskDeclined, DecidedBy: "p_ada", At: at(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if got, _ := q.AsksToAnnounce(ctx(t), 10); len(got) != 2 || got[0].State != store.AskDeclined {
			t.Errorf("after a decision, AsksToAnnounce = %+v", got)
		}
		if err := q.AnnouncedAsks(ctx(t), []string{"ask_ann1", "ask_none"}); err != nil {
			t.Fatal(err)
		}
		if got, _ := q.AsksToAnnounce(ctx(t), 10); len(got) != 1 || got[0].ID != "ask_ann0" {
			t.Errorf("after clearing ask_ann1, AsksToAnnounce = %+v; want ask_ann0", got)
		}
		if err := q.AnnouncedAsks(ctx(t), nil); err != nil {
			t.Errorf("AnnouncedAsks(nil) = %v", err)
		}
	})

}
