package control

import (
	"context"
	"sync/atomic"
)

// Value is an in-memory holder for a control whose value lives in the
// registry's process rather than in a user interface, such as a hosted
// control declared by an application in another language. It is safe for
// concurrent use.
//
// Its methods have the shapes of the value handles, and [Value.Handles]
// returns them ready to register:
//
//	v := control.NewValue("Ada")
//	reg.Register(control.Registration{Identity: id, Metadata: md, Handles: v.Handles()})
//
// Values are stored as given; the registry never modifies them, and callers
// must not modify a map or slice after storing it. The zero Value holds nil.
type Value struct {
	v     atomic.Pointer[holder]
	state atomic.Pointer[State]
}

type holder struct{ v any }

// NewValue returns a holder whose value is initial.
func NewValue(initial any) *Value {
	v := new(Value)
	v.Store(initial)
	return v
}

// Get returns the value. It never fails; the context is ignored.
func (v *Value) Get(context.Context) (any, error) { return v.Load(), nil }

// Set replaces the value. It never fails; the context is ignored.
func (v *Value) Set(_ context.Context, x any) error {
	v.Store(x)
	return nil
}

// Clear sets the value to nil.
func (v *Value) Clear(context.Context) error {
	v.Store(nil)
	return nil
}

// Load returns the value.
func (v *Value) Load() any {
	if h := v.v.Load(); h != nil {
		return h.v
	}
	return nil
}

// Store replaces the value. An application calls it for an edit a person
// made outside the registry; a proposal staged before the edit then becomes
// stale.
func (v *Value) Store(x any) { v.v.Store(&holder{x}) }

// State returns the runtime state set by SetState, in the shape of the
// GetState handle.
func (v *Value) State(context.Context) (State, error) {
	p := v.state.Load()
	if p == nil {
		return State{}, nil
	}
	st := *p
	if st.Valid != nil {
		st.Valid = Bool(*st.Valid)
	}
	return st, nil
}

// SetState replaces the runtime state, for example to disable the control.
func (v *Value) SetState(st State) {
	if st.Valid != nil {
		st.Valid = Bool(*st.Valid)
	}
	v.state.Store(&st)
}

// Handles returns the GetValue, SetValue, Clear and GetState handles backed
// by v.
func (v *Value) Handles() Handles {
	return Handles{GetValue: v.Get, SetValue: v.Set, Clear: v.Clear, GetState: v.State}
}
