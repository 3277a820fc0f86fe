package flow

import (
	"context"
	"time"
)

// dueApprovals returns the pending approvals whose deadline is at or
// before now, oldest first: the store reads only those, so a sweep costs
// what is due, not what waits.
func (k *Kernel) dueApprovals(ctx context.Context, now time.Time) ([]Approval, error) {
	var out []Approval
	err := k.store.View(ctx, func(tx Tx) error {
		recs, err := tx.DueApprovals(now)
		for _, r := range recs {
			out = append(out, r.Approval)
		}
		return err
	})
	return out, err
}

// markedInstances returns the instances whose apply mark was made at or
// before before (or carries no time), sorted by id.
func (k *Kernel) markedInstances(ctx context.Context, before time.Time) ([]Instance, error) {
	var out []Instance
	err := k.store.View(ctx, func(tx Tx) error {
		var err error
		out, err = tx.MarkedInstances(before)
		return err
	})
	return out, err
}
