package main

import (
	"context"
	"sync/atomic"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/store"
)

// unsavedControls is a store whose control registry reads from the
// underlying store and drops every write. assent bench runs on it with
// --drop-control-writes, to measure what a stage's durable write costs a
// controls_execute call; no server is meant to run on it.
type unsavedControls struct{ store.Store }

// ControlRegistry returns the underlying registry store with its writes
// dropped.
func (u unsavedControls) ControlRegistry() store.Controls {
	return &droppedWrites{Controls: u.Store.ControlRegistry()}
}

// droppedWrites is a control registry store that saves nothing.
type droppedWrites struct {
	store.Controls
	seq atomic.Int64
}

func (d *droppedWrites) SaveControl(context.Context, control.Update) error { return nil }

// SaveControlAudited drops u and rec, numbering rec as the audit log
// would.
func (d *droppedWrites) SaveControlAudited(context.Context, control.Update, store.AuditRecord) (int64, error) {
	return d.seq.Add(1), nil
}
