package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/store"
)

func testFlows(t *testing.T, open func(*testing.T) store.Store) {
	fs := open(t).Flows()
	update := func(t *testing.T, fn func(flow.Tx) error) {
		t.Helper()
		if err := fs.Update(ctx(t), fn); err != nil {
			t.Fatalf("Update = %v", err)
		}
	}
	view := func(t *testing.T, fn func(flow.Tx) error) {
		t.Helper()
		if err := fs.View(ctx(t), fn); err != nil {
			t.Fatalf("View = %v", err)
		}
	}
	inst := flow.Instance{ID: "i1", Program: "sha256:ab", Owner: "p_a", Phase: "draft",
		Facts: map[string]flow.Fact{"amount": {Status: "known", Value: "12"}}}

	t.Run("rollback", func(t *testing.T) {
		boom := errors.New("boom")
		err := fs.Update(ctx(t), func(tx flow.Tx) error {
			if err := tx.CreateInstance(inst); err != nil {
				return err
			}
			if err := tx.AppendJournal(flow.JournalEntry{Instance: "i1", Status: flow.JournalBegun}); err != nil {
				return err
			}
			// A transaction reads its own writes.
			if got, err := tx.Instance("i1"); err != nil || got.Phase != "draft" {
				t.Errorf("own write read back as %+v, %v", got, err)
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Update = %v, want the function's error", err)
		}
		view(t, func(tx flow.Tx) error {
			if _, err := tx.Instance("i1"); !errors.Is(err, flow.ErrNotFound) {
				t.Errorf("instance of a failed Update: %v, want ErrNotFound", err)
			}
			if j, err := tx.Journal("i1"); err != nil || len(j) != 0 {
				t.Errorf("journal of a failed Update = %+v, %v; want empty", j, err)
			}
			return nil
		})
	})

	t.Run("read-only view", func(t *testing.T) {
		writes := []struct {
			name string
			fn   func(flow.Tx) error
		}{
			{"PutProgram", func(tx flow.Tx) error { return tx.PutProgram("sha256:ro", []byte("{}")) }},
			{"CreateInstance", func(tx flow.Tx) error { return tx.CreateInstance(flow.Instance{ID: "i-ro", Phase: "p"}) }},
			{"AppendJournal", func(tx flow.Tx) error { return tx.AppendJournal(flow.JournalEntry{Instance: "i-ro"}) }},
			{"PutReceipt", func(tx flow.Tx) error { return tx.PutReceipt(flow.Receipt{Prescription: "prx-ro"}) }},
		}
		for _, w := range writes {
			_ = fs.View(ctx(t), func(tx flow.Tx) error {
				if err := w.fn(tx); err == nil {
					t.Errorf("%s in a View succeeded", w.name)
				}
				return nil
			})
		}
		view(t, func(tx flow.Tx) error {
			if _, err := tx.Program("sha256:ro"); !errors.Is(err, flow.ErrNotFound) {
				t.Errorf("a View's PutProgram was kept: %v", err)
			}
			if _, err := tx.Instance("i-ro"); !errors.Is(err, flow.ErrNotFound) {
				t.Errorf("a View's CreateInstance was kept: %v", err)
			}
			return nil
		})
	})

	t.Run("programs", func(t *testing.T) {
		update(t, func(tx flow.Tx) error {
			for _, p := range []struct{ fp, src string }{{"sha256:cd", "two"}, {"sha256:ab", "one"}, {"sha256:ab", "replaced?"}} {
				if err := tx.PutProgram(p.fp, []byte(p.src)); err != nil {
					return err
				}
			}
			return nil
		})
		loadedAt := at(time.Minute)
		update(t, func(tx flow.Tx) error {
			for _, l := range []flow.ProgramLoad{
				{Fingerprint: "sha256:cd", ProgramID: "pay", Version: "2", Status: flow.ProgramProposed, LoadedBy: "p_a", LoaderKind: "agent", LoadedAt: loadedAt},
				{Fingerprint: "sha256:ab", ProgramID: "pay", Version: "1", Status: flow.ProgramProposed, LoaderKind: "operator", LoadedAt: loadedAt},
				{Fingerprint: "sha256:ab", ProgramID: "pay", Version: "1", Status: flow.ProgramActive, LoaderKind: "operator", LoadedAt: loadedAt, Activation: 1},
			} {
				if err := tx.PutProgramLoad(l); err != nil {
					return err
				}
			}
			return nil
		})
		view(t, func(tx flow.Tx) error {
			src, err := tx.Program("sha256:ab")
			if err != nil || string(src) != "one" {
				t.Errorf("Program = %q, %v; want the first source kept", src, err)
			}
			if fps, err := tx.Programs(); err != nil || !slices.Equal(fps, []string{"sha256:ab", "sha256:cd"}) {
				t.Errorf("Programs = %v, %v; want sorted fingerprints", fps, err)
			}
			if _, err := tx.Program("sha256:none"); !errors.Is(err, flow.ErrNotFound) {
				t.Errorf("unknown program: %v, want ErrNotFound", err)
			}
			l, err := tx.ProgramLoad("sha256:ab")
			if err != nil || l.Status != flow.ProgramActive || l.Activation != 1 || !l.LoadedAt.Equal(loadedAt) {
				t.Errorf("ProgramLoad = %+v, %v; want the replacing record", l, err)
			}
			loads, err := tx.ProgramLoads()
			if err != nil || len(loads) != 2 || loads[0].Fingerprint != "sha256:ab" || loads[1].LoadedBy != "p_a" {
				t.Errorf("ProgramLoads = %+v, %v; want two, sorted by fingerprint", loads, err)
			}
			if _, err := tx.ProgramLoad("sha256:none"); !errors.Is(err, flow.ErrNotFound) {
				t.Errorf("unknown program load: %v, want ErrNotFound", err)
			}
			return nil
		})
	})

	t.Run("instances and revisions", func(t *testing.T) {
		update(t, func(tx flow.Tx) error { return tx.CreateInstance(inst) })
		update(t, func(tx flow.Tx) error {
			return tx.CreateInstance(flow.Instance{ID: "i0", Program: "sha256:ab", Phase: "draft"})
		})
		if err := fs.Update(ctx(t), func(tx flow.Tx) error { return tx.CreateInstance(inst) }); err == nil {
			t.Error("a second instance with one id was created")
		}
		next := inst
		next.Revision, next.Phase = 1, "submitted"
		update(t, func(tx flow.Tx) error { return tx.UpdateInstance(next, 0, "") })
		stale := []struct {
			name    string
			rev     int64
			pending string
		}{
			{"stale revision", 0, ""},
			{"future revision", 5, ""},
			{"other pending prescription", 1, "prx-other"},
		}
		for _, s := range stale {
			bad := next
			bad.Revision, bad.Phase = s.rev+1, "hijacked"
			if err := fs.Update(ctx(t), func(tx flow.Tx) error { return tx.UpdateInstance(bad, s.rev, s.pending) }); !errors.Is(err, flow.ErrConflict) {
				t.Errorf("%s: UpdateInstance = %v, want ErrConflict", s.name, err)
			}
		}
		// The pending prescription is part of the compare-and-swap.
		claimed := next
		claimed.Pending = "prx-1"
		update(t, func(tx flow.Tx) error { return tx.UpdateInstance(claimed, 1, "") })
		if err := fs.Update(ctx(t), func(tx flow.Tx) error { return tx.UpdateInstance(claimed, 1, "") }); !errors.Is(err, flow.ErrConflict) {
			t.Errorf("second claim of revision 1: %v, want ErrConflict", err)
		}
		done := claimed
		done.Revision, done.Phase, done.Pending = 2, "approved", ""
		update(t, func(tx flow.Tx) error { return tx.UpdateInstance(done, 1, "prx-1") })
		view(t, func(tx flow.Tx) error {
			got, err := tx.Instance("i1")
			if err != nil || got.Revision != 2 || got.Phase != "approved" || got.Pending != "" || got.Owner != "p_a" || got.Facts["amount"].Value != "12" {
				t.Errorf("Instance = %+v, %v", got, err)
			}
			list, err := tx.Instances()
			if err != nil || len(list) != 2 || list[0].ID != "i0" || list[1].ID != "i1" {
				t.Errorf("Instances = %+v, %v; want i0, i1", list, err)
			}
			if _, err := tx.Instance("i-none"); !errors.Is(err, flow.ErrNotFound) {
				t.Errorf("unknown instance: %v, want ErrNotFound", err)
			}
			return nil
		})

		// A conflicting apply keeps none of its transaction's writes.
		err := fs.Update(ctx(t), func(tx flow.Tx) error {
			if err := tx.AppendJournal(flow.JournalEntry{Instance: "i1", Prescription: "prx-lost", Status: flow.JournalBegun}); err != nil {
				return err
			}
			return tx.UpdateInstance(done, 1, "")
		})
		if !errors.Is(err, flow.ErrConflict) {
			t.Fatalf("stale apply = %v, want ErrConflict", err)
		}
		view(t, func(tx flow.Tx) error {
			j, err := tx.Journal("i1")
			if err != nil || slices.ContainsFunc(j, func(e flow.JournalEntry) bool { return e.Prescription == "prx-lost" }) {
				t.Errorf("journal kept a conflicting apply's entry: %+v, %v", j, err)
			}
			return nil
		})
	})

	t.Run("concurrent applies", func(t *testing.T) {
		base := flow.Instance{ID: "i-raced", Program: "sha256:ab", Phase: "draft", Revision: 3}
		update(t, func(tx flow.Tx) error { return tx.CreateInstance(base) })
		// Every applier read revision 3 before the race, as the kernel
		// does; exactly one may commit revision 4.
		errs := race(8, func(i int) error {
			return fs.Update(ctx(t), func(tx flow.Tx) error {
				next := base
				next.Revision, next.Phase = 4, fmt.Sprint("phase-", i)
				if err := tx.UpdateInstance(next, 3, ""); err != nil {
					return err
				}
				return tx.AppendJournal(flow.JournalEntry{Instance: "i-raced", Prescription: fmt.Sprint("prx-", i), Revision: 3, Status: flow.JournalCommitted})
			})
		})
		winner := exactlyOne(t, "apply on one revision", errs, flow.ErrConflict)
		if winner < 0 {
			return
		}
		view(t, func(tx flow.Tx) error {
			got, err := tx.Instance("i-raced")
			if err != nil || got.Revision != 4 || got.Phase != fmt.Sprint("phase-", winner) {
				t.Errorf("after the race: %+v, %v; want the winner's revision 4", got, err)
			}
			j, err := tx.Journal("i-raced")
			if err != nil || len(j) != 1 || j[0].Prescription != fmt.Sprint("prx-", winner) {
				t.Errorf("journal after the race = %+v, %v; want only the winner's entry", j, err)
			}
			return nil
		})
	})

	t.Run("approvals", func(t *testing.T) {
		apr := func(id, instance string, status flow.ApprovalStatus, created time.Duration) flow.ApprovalRecord {
			return flow.ApprovalRecord{
				Approval: flow.Approval{ID: id, Instance: instance, Revision: 2, Program: "sha256:ab", Transition: "pay/approve",
					Requester: "p_a", Awaiting: "human.approve", Operation: "pay", RequiredCapabilities: []string{"human.approve"},
					Status: status, CreatedAt: at(created)},
				Parameters: map[string]string{"amount": "12"},
			}
		}
		// Filed in the order of their creation times; ids sort the other
		// way, so an order by id shows.
		update(t, func(tx flow.Tx) error {
			for _, r := range []flow.ApprovalRecord{
				apr("apr-3", "i1", flow.ApprovalPending, time.Second),
				apr("apr-2", "i1", flow.ApprovalPending, 2*time.Second),
				apr("apr-1", "i0", flow.ApprovalPending, 3*time.Second),
			} {
				if err := tx.PutApproval(r); err != nil {
					return err
				}
			}
			return nil
		})
		decided := apr("apr-3", "i1", flow.ApprovalApproved, time.Second)
		decided.Approval.Decider, decided.Approval.DecidedAt = "p_h", at(time.Minute)
		update(t, func(tx flow.Tx) error { return tx.PutApproval(decided) })
		view(t, func(tx flow.Tx) error {
			got, err := tx.Approval("apr-3")
			if err != nil || got.Approval.Status != flow.ApprovalApproved || got.Approval.Decider != "p_h" ||
				!got.Approval.DecidedAt.Equal(decided.Approval.DecidedAt) || got.Parameters["amount"] != "12" {
				t.Errorf("Approval = %+v, %v; want the decided record", got, err)
			}
			if _, err := tx.Approval("apr-none"); !errors.Is(err, flow.ErrNotFound) {
				t.Errorf("unknown approval: %v, want ErrNotFound", err)
			}
			ids := func(recs []flow.ApprovalRecord) []string {
				out := []string{}
				for _, r := range recs {
					out = append(out, r.Approval.ID)
				}
				return out
			}
			pending, err := tx.PendingApprovals()
			if err != nil || !slices.Equal(ids(pending), []string{"apr-2", "apr-1"}) {
				t.Errorf("PendingApprovals = %v, %v; want apr-2, apr-1 (oldest first)", ids(pending), err)
			}
			of, err := tx.InstanceApprovals("i1")
			if err != nil || !slices.Equal(ids(of), []string{"apr-3", "apr-2"}) {
				t.Errorf("InstanceApprovals(i1) = %v, %v; want apr-3, apr-2 (every status, oldest first)", ids(of), err)
			}
			if none, err := tx.InstanceApprovals("i-none"); err != nil || len(none) != 0 {
				t.Errorf("InstanceApprovals of an instance without any = %v, %v", ids(none), err)
			}
			return nil
		})
	})

	t.Run("a prescription added again", func(t *testing.T) {
		rec := func(id, secret string) flow.PrescriptionRecord {
			return flow.PrescriptionRecord{Prescription: flow.Prescription{ID: id, Instance: "i-a", Revision: 3, Transition: "t", IssuedAt: epoch},
				Parameters: map[string]string{"key": secret}, Secret: []string{"key"}}
		}
		dropped := func(id string) flow.PrescriptionRecord {
			r := rec(id, "")
			r.Parameters = map[string]string{}
			return r
		}
		update(t, func(tx flow.Tx) error {
			// Added, and added again after its secrets were dropped (an
			// apply that failed): the second add stores it again.
			if err := tx.AddPrescription(rec("prx-a", "s1")); err != nil {
				return err
			}
			if err := tx.PutPrescription(dropped("prx-a")); err != nil {
				return err
			}
			if err := tx.AddPrescription(rec("prx-a", "s2")); err != nil {
				return err
			}
			// Applied: its receipt is stored and its secrets dropped; an
			// add keeps it as it is.
			if err := tx.AddPrescription(rec("prx-b", "s1")); err != nil {
				return err
			}
			if err := tx.PutReceipt(flow.Receipt{ID: "rcpt-b", Prescription: "prx-b", Instance: "i-a", FromRevision: 3, Revision: 4, Phase: "p", CommittedAt: epoch}); err != nil {
				return err
			}
			return tx.PutPrescription(dropped("prx-b"))
		})
		update(t, func(tx flow.Tx) error { return tx.AddPrescription(rec("prx-b", "s2")) })
		view(t, func(tx flow.Tx) error {
			if a, err := tx.Prescription("prx-a"); err != nil || a.Parameters["key"] != "s2" {
				t.Errorf("prx-a = %+v, %v; want the record added again", a, err)
			}
			if b, err := tx.Prescription("prx-b"); err != nil || len(b.Parameters) != 0 {
				t.Errorf("prx-b = %+v, %v; want the applied record, its secret dropped", b, err)
			}
			return nil
		})
	})

	t.Run("journal, prescriptions and receipts", func(t *testing.T) {
		statuses := []flow.JournalStatus{flow.JournalBegun, flow.JournalExecuting, flow.JournalCommitted}
		update(t, func(tx flow.Tx) error {
			for i, s := range statuses {
				if err := tx.AppendJournal(flow.JournalEntry{Instance: "i-j", Prescription: "prx-j", Transition: "t", Revision: 7, Status: s, At: at(time.Duration(i) * time.Second)}); err != nil {
					return err
				}
				if err := tx.AppendJournal(flow.JournalEntry{Instance: "i-k", Prescription: "prx-k", Status: flow.JournalAborted, Error: "no"}); err != nil {
					return err
				}
			}
			if err := tx.PutPrescription(flow.PrescriptionRecord{Prescription: flow.Prescription{ID: "prx-j", Instance: "i-j", Revision: 7, Transition: "t", IssuedAt: epoch},
				Parameters: map[string]string{"iban": "DE00"}, Secret: []string{"iban"}}); err != nil {
				return err
			}
			return tx.PutReceipt(flow.Receipt{ID: "rcpt-j", Prescription: "prx-j", Instance: "i-j", FromRevision: 7, Revision: 8, Phase: "paid", CommittedAt: at(time.Minute)})
		})
		// A prescription is replaced whole (its secret values dropped).
		update(t, func(tx flow.Tx) error {
			return tx.PutPrescription(flow.PrescriptionRecord{Prescription: flow.Prescription{ID: "prx-j", Instance: "i-j", Revision: 7, Transition: "t", IssuedAt: epoch}})
		})
		view(t, func(tx flow.Tx) error {
			j, err := tx.Journal("i-j")
			if err != nil || len(j) != len(statuses) {
				t.Fatalf("Journal = %+v, %v", j, err)
			}
			for i, e := range j {
				if e.Status != statuses[i] || e.Instance != "i-j" || !e.At.Equal(at(time.Duration(i)*time.Second)) {
					t.Errorf("journal entry %d = %+v, want status %s in append order", i, e, statuses[i])
				}
			}
			if k, err := tx.Journal("i-k"); err != nil || len(k) != 3 || k[0].Error != "no" {
				t.Errorf("Journal(i-k) = %+v, %v", k, err)
			}
			p, err := tx.Prescription("prx-j")
			if err != nil || p.Prescription.Revision != 7 || len(p.Parameters) != 0 {
				t.Errorf("Prescription = %+v, %v; want the replacing record", p, err)
			}
			if _, err := tx.Prescription("prx-none"); !errors.Is(err, flow.ErrNotFound) {
				t.Errorf("unknown prescription: %v, want ErrNotFound", err)
			}
			r, err := tx.Receipt("prx-j")
			if err != nil || r.ID != "rcpt-j" || r.Revision != 8 || !r.CommittedAt.Equal(at(time.Minute)) {
				t.Errorf("Receipt = %+v, %v", r, err)
			}
			if _, err := tx.Receipt("prx-none"); !errors.Is(err, flow.ErrNotFound) {
				t.Errorf("unknown receipt: %v, want ErrNotFound", err)
			}
			return nil
		})
	})
}
