// Package unsaved wraps a store so that its control registry saves
// nothing. It exists to measure what the durable write of a control
// command costs a call (assent bench --drop-control-writes and the
// server's benchmarks): a server on such a store forgets every proposal
// at restart, so none is meant to run on it.
package unsaved

import (
	"context"
	"sync/atomic"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/store"
)

// Controls returns s with its control registry's writes dropped: the
// registry reads from s and every save succeeds without writing.
func Controls(s store.Store) store.Store { return controlsDropped{s} }

type controlsDropped struct{ store.Store }

func (c controlsDropped) ControlRegistry() store.Controls {
	return &droppedWrites{Controls: c.Store.ControlRegistry()}
}

// droppedWrites is a control registry store that saves nothing.
type droppedWrites struct {
	store.Controls
	seq atomic.Int64
}

func (d *droppedWrites) SaveControl(context.Context, control.Update) error { return nil }

// SaveControlAudited drops u and rec, numbering rec as the audit log
// would.
func (d *droppedWrites) SaveControlAudited(context.Context, control.Update, store.AuditRecord, *store.DecisionDeadline) (int64, error) {
	return d.seq.Add(1), nil
}
