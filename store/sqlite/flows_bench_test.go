package sqlite

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/assent-run/assent/flow"
)

// BenchmarkFlowSweepRead measures the read of a deadline sweep while 1000
// approvals wait and three are due: reading every pending approval (what
// the sweep read before) against reading only the due ones.
func BenchmarkFlowSweepRead(b *testing.B) {
	ctx := context.Background()
	db, err := Open(ctx, b.TempDir()+"/assent.db")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	st := db.Flows()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	err = st.Update(ctx, func(tx flow.Tx) error {
		for i := range 1003 {
			deadline := now.Add(time.Hour)
			if i%334 == 1 {
				deadline = now.Add(-time.Second)
			}
			id := "apr-" + strconv.Itoa(i)
			rec := flow.ApprovalRecord{Approval: flow.Approval{ID: id, Instance: "i" + strconv.Itoa(i), Transition: "p/cancel",
				Status: flow.ApprovalPending, CreatedAt: now.Add(-time.Minute), Deadline: deadline, Summary: "pay 120.00 EUR to ACME GmbH"}}
			if err := tx.PutApproval(rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		read func(flow.Tx) ([]flow.ApprovalRecord, error)
		want int
	}{
		{"all_pending", func(tx flow.Tx) ([]flow.ApprovalRecord, error) { return tx.PendingApprovals() }, 1003},
		{"due_only", func(tx flow.Tx) ([]flow.ApprovalRecord, error) { return tx.DueApprovals(now) }, 3},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				err := st.View(ctx, func(tx flow.Tx) error {
					got, err := c.read(tx)
					if err == nil && len(got) != c.want {
						b.Fatalf("read %d, want %d", len(got), c.want)
					}
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
