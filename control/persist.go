package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ReasonStoreUnavailable: the registry's [Persister] could not save the
// change, so nothing changed. It is also the reason of every mutation after
// [Registry.Close].
const ReasonStoreUnavailable Reason = "store_unavailable"

// ErrConflict is the error, wrapped, of a [Persister] that refused an
// [Update] because the saved state of its control is not what the update's
// [Expect] says: another registry sharing the store changed the control
// first. Nothing is saved. The registry then reads the control again and
// refuses the command with stale_revision or staged_value_stale.
var ErrConflict = errors.New("control: the saved state of the control changed")

// Persister keeps, outside the process, what a registry must not lose when
// the process restarts: the open proposal and the undo history of every
// control, the hosted forms with their values, and the highest proposal
// revision handed out. Set it as [Config.Store]; [Registry.Restore] rebuilds
// a new registry from what it saved.
//
// The registry writes through: a command changes the registry only after
// its write has succeeded, and each call describes everything one command
// changes, which the Persister applies atomically — all of it or nothing.
// Values arrive encoded as JSON, so a Persister stores them as given. A
// Persister must be safe for concurrent use; the registry never calls it
// twice at once for the same control.
type Persister interface {
	// SaveControl applies u to the saved state of the control u.Key.
	SaveControl(ctx context.Context, u Update) error
	// ForgetControl erases the saved proposal and undo history of the
	// control k, as when it is unregistered. Its hosted declaration, if
	// any, stays.
	ForgetControl(ctx context.Context, k Key) error
	// SaveForm records a hosted form, replacing any earlier declaration of
	// the same form id. Controls the earlier declaration had and f leaves
	// out lose their saved state (declaration, value, proposal, history);
	// the others keep their proposals and histories and take f's values.
	SaveForm(ctx context.Context, f SavedForm) error
	// DeleteForm erases the hosted form formID with the saved state of
	// its controls. An unknown form id is not an error.
	DeleteForm(ctx context.Context, formID string) error
	// LoadControls returns everything saved.
	LoadControls(ctx context.Context) (Saved, error)
}

// ControlLoader is implemented by a [Persister] that reads the saved state
// of one control by itself. [Registry.Refresh] uses it when the Persister
// has it, and otherwise reads everything with LoadControls.
type ControlLoader interface {
	// LoadControl returns what is saved for the control k. A control with
	// nothing saved is not an error: its LoadedControl has no proposal,
	// no history and Hosted false.
	LoadControl(ctx context.Context, k Key) (LoadedControl, error)
}

// LoadedControl is the saved state of one control, as a [ControlLoader]
// reads it in one consistent view of the store.
type LoadedControl struct {
	// Revision is the highest proposal revision ever saved.
	Revision int64
	// Control is the control's open proposal and undo history; its Key
	// is the one asked for.
	Control SavedControl
	// Hosted reports that the control belongs to a saved hosted form;
	// Value is then its saved value.
	Hosted bool
	Value  json.RawMessage
}

// FormLoader is implemented by a [Persister] that reads one hosted form by
// itself. [Registry.RefreshForm] uses it when the Persister has it, and
// otherwise reads everything with LoadControls.
type FormLoader interface {
	// LoadForm returns the saved hosted form formID: Revision is the
	// highest revision saved, Forms holds the form (or nothing when no such
	// form is saved) and Controls the open proposals and undo histories of
	// the controls of form id formID.
	LoadForm(ctx context.Context, formID string) (Saved, error)
}

// CommandSaver is implemented by a [Persister] that keeps, with the change
// a command makes, a record of the command itself, such as an audit log
// kept in the same database. When the registry's Persister implements it,
// the change of a command run by [Registry.Execute] is saved with
// SaveCommand instead of SaveControl; every other write (an edit through
// [Registry.SetHostedValue], a form, a control unregistered) goes through
// the Persister's other methods as before.
type CommandSaver interface {
	// SaveCommand applies u as SaveControl does. c is the command making
	// the change, which succeeds exactly when the save does; a
	// CommandSaver that records c writes it atomically with u, so that
	// both are saved or neither is.
	SaveCommand(ctx context.Context, u Update, c SavedCommand) error
}

// SavedCommand is the command whose change a [CommandSaver] saves. It
// shares memory with the command under way: a CommandSaver reads it during
// the call and does not modify or keep it.
type SavedCommand struct {
	// Command is the command as events show it: its Value is nil when
	// ValueRedacted is set.
	Command Command
	Context CommandContext
	// ValueRedacted reports that the control's value is hidden from those
	// who read about it (a secret or unreadable control), so a record of
	// the command must not carry the value.
	ValueRedacted bool
}

// Update is the change one command makes to the saved state of one
// control. Fields left zero leave that part unchanged.
type Update struct {
	Key Key
	// Stage, when not nil, replaces the open proposal. Its revision is
	// also the registry's new highest revision, when higher.
	Stage *SavedProposal
	// Unstage closes the open proposal, if any. Stage and Unstage are
	// never both set.
	Unstage bool
	// Pop removes the newest entry of the undo history; it is never set
	// together with Push.
	Pop bool
	// Push adds an entry on top of the undo history; the oldest entries
	// beyond Depth are dropped, so at most Depth remain.
	Push  *SavedChange
	Depth int
	// Value, when not nil, is the new value of a hosted control. A
	// Persister ignores it for a control of no saved form.
	Value json.RawMessage
	// Expect is what the update expects of the saved state before it
	// applies. The registry sets it on every change a command makes; the
	// zero Expect checks nothing.
	Expect Expect
}

// Expect is what an [Update] expects of the saved state of its control.
// A Persister checks it in the transaction that applies the update, while
// no other writer can change the control, and refuses with an error
// wrapping [ErrConflict], saving nothing, when it does not hold. This is
// what serializes decisions taken at the same moment by registries that
// share one store: of two applies of one proposal, one closes it and the
// other finds it gone.
type Expect struct {
	// Proposal turns on the check of the open proposal: its revision must
	// be Revision, or no proposal may be open when Revision is 0. With
	// Proposal set, an update that stages must also stage a revision
	// higher than that of the proposal it replaces.
	Proposal bool
	Revision int64
	// Value, when not nil, is the value the control's saved hosted value
	// must equal as [Equal] decides (JSON numbers compare by value). It is
	// not checked for a control of no saved form.
	Value json.RawMessage
	// Undo turns on the check of the undo history: its newest entry must
	// have been made at UndoAt (compared at the store's precision), or the
	// history must be empty when UndoAt is zero.
	Undo   bool
	UndoAt time.Time
}

// EqualJSON reports whether the JSON texts a and b encode equal values as
// [Equal] decides; an empty text stands for null. A text that is not JSON
// equals only the same bytes. A [Persister] uses it to check
// [Expect.Value].
func EqualJSON(a, b json.RawMessage) bool {
	if string(a) == string(b) {
		return true
	}
	x, errA := decode(a)
	y, errB := decode(b)
	return errA == nil && errB == nil && Equal(x, y)
}

// SavedProposal is an open proposal as a [Persister] keeps it.
type SavedProposal struct {
	Revision   int64
	Provenance Provenance
	StagedAt   time.Time
	// Why is the proposer's reason, as it gave it.
	Why string
	// Value is the proposed value; Base is the live value when it was
	// staged, against which staleness is decided.
	Value json.RawMessage
	Base  json.RawMessage
}

// SavedChange is an entry of an undo history as a [Persister] keeps it.
type SavedChange struct {
	// Action is apply or clear.
	Action     Action
	Previous   json.RawMessage
	Applied    json.RawMessage
	Provenance Provenance
	At         time.Time
}

// SavedControl is the saved state of one control.
type SavedControl struct {
	Key      Key
	Proposal *SavedProposal
	// History is the undo history, oldest first.
	History []SavedChange
}

// SavedForm is a hosted form as a [Persister] keeps it.
type SavedForm struct {
	FormID  string
	Owner   string
	Private bool
	// Controls are in declaration order.
	Controls []SavedHosted
}

// SavedHosted is one control of a [SavedForm].
type SavedHosted struct {
	Key Key
	// Spec is the declaration (identity, metadata and state) as JSON;
	// the Persister keeps it as given.
	Spec json.RawMessage
	// Value is the current value; it is JSON null for a secret control,
	// whose value is never saved.
	Value json.RawMessage
}

// Saved is everything a [Persister] holds for a registry.
type Saved struct {
	// Revision is the highest proposal revision ever saved.
	Revision int64
	// Forms are the hosted forms, in the order they were first saved.
	Forms []SavedForm
	// Controls are the controls with an open proposal or an undo history.
	Controls []SavedControl
}

// HostedForm is a form whose controls the registry holds itself, for an
// application that is not written in Go: it declares the controls with
// their metadata and initial values, and the registry keeps each value in a
// [Value].
type HostedForm struct {
	FormID string `json:"formId"`
	// Owner and Private are recorded for the application serving the
	// registry (who declared the form, and whether others may see it);
	// the registry itself does not interpret them.
	Owner    string          `json:"owner,omitempty"`
	Private  bool            `json:"private,omitempty"`
	Controls []HostedControl `json:"controls"`
}

// HostedControl is one control of a [HostedForm]. Its identity's form id
// is the form's; it may be left empty.
type HostedControl struct {
	Identity Identity `json:"identity"`
	Metadata Metadata `json:"metadata"`
	Value    any      `json:"value"`
	State    *State   `json:"state,omitempty"`
}

// hostedForm is a hosted form as the registry tracks it.
type hostedForm struct {
	owner   string
	private bool
	keys    []Key
}

// restoredSlot is the decoded saved state of a control not registered yet.
type restoredSlot struct {
	staged *staged
	hist   []undoEntry
}

// hostedSpec is the JSON form of a hosted control's declaration.
type hostedSpec struct {
	Identity Identity `json:"identity"`
	Metadata Metadata `json:"metadata"`
	State    *State   `json:"state,omitempty"`
}

func storeError(what string, err error) *Error {
	return &Error{Reason: ReasonStoreUnavailable, Message: fmt.Sprintf("%s could not be saved, so nothing changed: %v; try again when the store is reachable", what, err)}
}

var errClosed = fmt.Errorf("the registry is closed")

// encode returns the JSON form of a control value.
func encode(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("the value has no JSON form: %w", err)
	}
	return b, nil
}

// decode returns the value of a saved JSON form; an absent one is nil.
func decode(b json.RawMessage) (any, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// Close stops the registry from writing to its [Persister]: from then on
// every mutation, Host, Unhost and SetHostedValue is refused with
// store_unavailable, and unregistering a control — as an application does
// while it shuts down — no longer erases what was saved for it, so a new
// registry restores it. Close does nothing to a registry without a
// Persister.
func (r *Registry) Close() { r.closed.Store(true) }

// persisting reports whether the registry writes through.
func (r *Registry) persisting() bool { return r.store != nil }

// save writes u through, refusing once the registry is closed.
func (r *Registry) save(ctx context.Context, u Update) error {
	if r.closed.Load() {
		return errClosed
	}
	return r.store.SaveControl(ctx, u)
}

// save writes u through for the command under way, telling a
// [CommandSaver] which command it is.
func (x *execution) save(u Update) error {
	cs, ok := x.r.store.(CommandSaver)
	if !ok {
		return x.r.save(x.ctx, u)
	}
	if x.r.closed.Load() {
		return errClosed
	}
	c := SavedCommand{Command: x.cmd, Context: x.cc, ValueRedacted: x.reg.redacted}
	if c.ValueRedacted {
		c.Command.Value = nil
	}
	return cs.SaveCommand(x.ctx, u, c)
}

// savedProposal encodes sv.
func savedProposal(sv *staged) (*SavedProposal, error) {
	v, err := encode(sv.value)
	if err != nil {
		return nil, err
	}
	b, err := encode(sv.base)
	if err != nil {
		return nil, err
	}
	return &SavedProposal{Revision: sv.prop.Revision, Provenance: sv.prop.Provenance, StagedAt: sv.prop.StagedAt, Why: sv.prop.Why, Value: v, Base: b}, nil
}

// savedChange encodes e.
func savedChange(e *undoEntry) (*SavedChange, error) {
	p, err := encode(e.previous)
	if err != nil {
		return nil, err
	}
	a, err := encode(e.applied)
	if err != nil {
		return nil, err
	}
	return &SavedChange{Action: e.action, Previous: p, Applied: a, Provenance: e.prov, At: e.at}, nil
}

// hostedValue returns the JSON form of a hosted control's value for an
// update, or nil when reg is not hosted. A secret value is never saved.
func hostedValue(reg *registration) (json.RawMessage, error) {
	switch {
	case reg.hosted == nil:
		return nil, nil
	case reg.secret:
		return json.RawMessage("null"), nil
	}
	return encode(reg.hosted.Load())
}

// persist writes u through for a command that changed a hosted control's
// value, which u carries. On failure it calls revert, if not nil, and
// returns the refusal to report.
func (x *execution) persist(u Update, revert func()) (Result, bool) {
	if v, err := hostedValue(x.reg); err != nil {
		if revert != nil {
			revert()
		}
		return x.failed(err), false
	} else if v != nil {
		u.Value = v
	}
	return x.write(u, revert)
}

// persistProposal writes u through for a command that leaves the value
// as it is (stage, discard): the proposal changes, the saved value is not
// written again.
func (x *execution) persistProposal(u Update) (Result, bool) {
	return x.write(u, nil)
}

// write saves u, calling revert, if not nil, when the store refuses.
func (x *execution) write(u Update, revert func()) (Result, bool) {
	if err := x.save(u); err != nil {
		if revert != nil {
			revert()
		}
		if errors.Is(err, ErrConflict) {
			return x.conflict(u.Expect), false
		}
		return x.refuse(ReasonStoreUnavailable, storeError("the "+string(x.cmd.Action)+" of "+x.reg.id.String(), err).Message), false
	}
	return Result{}, true
}

// conflict reports a write the store refused because another registry
// sharing it changed the control first. It reads the control again, so
// this registry shows what the store holds, and returns the refusal:
// stale_revision when the open proposal is no longer the one expected,
// nothing_to_undo when an undo finds the history emptied, staged_value_stale
// when the value or the undo history changed otherwise.
func (x *execution) conflict(e Expect) Result {
	id := x.reg.id
	if err := x.r.reload(x.ctx, x.s); err != nil {
		x.res.Snapshot = Snapshot{}
		return x.refuse(ReasonStoreUnavailable, fmt.Sprintf("%s was changed elsewhere while this %s ran, so nothing changed, and it could not be read again: %s", id, x.cmd.Action, err.Message))
	}
	x.res.Snapshot = Snapshot{} // taken before the control was read again
	if e.Proposal {
		var now int64
		if sv := x.s.staged.Load(); sv != nil {
			now = sv.prop.Revision
		}
		if now != e.Revision {
			msg := fmt.Sprintf("the proposal for %s was decided elsewhere while this %s ran, so nothing changed; nothing is staged now", id, x.cmd.Action)
			if now != 0 {
				msg = fmt.Sprintf("the proposal for %s changed elsewhere while this %s ran (it is now revision %d), so nothing changed; review the proposal again", id, x.cmd.Action, now)
			}
			return x.refuse(ReasonStaleRevision, msg)
		}
	}
	if e.Undo {
		x.s.mu.Lock()
		empty := x.s.hist.n == 0
		x.s.mu.Unlock()
		if empty {
			return x.refuse(ReasonNothingToUndo, fmt.Sprintf("the change undo would reverse on %s was undone elsewhere meanwhile; nothing is left to undo", id))
		}
	}
	return x.refuse(ReasonStagedValueStale, fmt.Sprintf("%s was changed elsewhere while this %s ran, so nothing changed; review its current value, then try again", id, x.cmd.Action))
}

// expectProposal returns the expectation that the open proposal is sv.
func expectProposal(sv *staged) Expect {
	e := Expect{Proposal: true}
	if sv != nil {
		e.Revision = sv.prop.Revision
	}
	return e
}

// expectValue sets e.Value to the JSON form of v when reg is hosted (and
// not secret, whose value is never saved). A value with no JSON form sets
// nothing.
func expectValue(e *Expect, reg *registration, v any) {
	if reg.hosted == nil || reg.secret {
		return
	}
	if b, err := encode(v); err == nil {
		e.Value = b
	}
}

// restoreWrite undoes a write to the control after its change could not be
// saved, when the value it replaced is known.
func (x *execution) restoreWrite(prev any) func() {
	h := &x.reg.h
	if h.SetValue == nil || h.GetValue == nil {
		return nil
	}
	ctx := context.WithoutCancel(x.ctx)
	return func() { _ = call(func() error { return h.SetValue(ctx, prev) }) }
}

// prepare checks reg and returns the registration the registry keeps.
func prepare(reg Registration) (*registration, error) {
	if err := reg.Identity.Validate(); err != nil {
		return nil, err
	}
	if err := reg.Metadata.validate(); err != nil {
		return nil, err
	}
	rg := &registration{id: reg.Identity.clone(), md: reg.Metadata.clone(), h: reg.Handles}
	if rg.md.Sensitivity == "" {
		rg.md.Sensitivity = Public
	}
	var err error
	if rg.values, err = newValueChecker(&rg.md); err != nil {
		return nil, err
	}
	rg.md.Capabilities = slices.Clip(deriveCapabilities(&rg.md, &rg.h))
	for _, c := range rg.md.Capabilities {
		rg.caps |= capBit(c)
	}
	rg.redacted = rg.md.Redacted()
	rg.secret = rg.md.IsSecret()
	rg.writable = rg.md.IsWritable()
	return rg, nil
}

// Host registers the controls of f, each holding its value in a [Value]
// created from its declared value and state, and replaces an earlier
// declaration of the same form: its controls that f leaves out are
// unregistered, the others keep their proposals and undo histories and take
// f's values. With a [Persister], the declaration is saved first and
// nothing changes when that fails (store_unavailable).
//
// Host, [Registry.Unhost] and [Registry.RefreshForm] of one form id run one
// at a time, each waiting for the one under way; those of different forms
// run at once, so a slow store write for one form holds up no other.
//
// The error, always an [*Error], reports an invalid form id, identity or
// metadata, a control declared twice, or the store's failure.
func (r *Registry) Host(ctx context.Context, f HostedForm) error {
	ctx = orBackground(ctx)
	defer r.lockForm(f.FormID)()
	regs, err := r.hostedRegistrations(f)
	if err != nil {
		return err
	}
	if r.persisting() {
		sf := SavedForm{FormID: f.FormID, Owner: f.Owner, Private: f.Private, Controls: make([]SavedHosted, len(regs))}
		for i, rg := range regs {
			spec, err := json.Marshal(hostedSpec{Identity: rg.id, Metadata: f.Controls[i].Metadata, State: f.Controls[i].State})
			if err != nil {
				return &Error{Reason: ReasonInvalidRequest, Message: fmt.Sprintf("%s: the declaration has no JSON form: %v", rg.id, err)}
			}
			v, err := hostedValue(rg)
			if err != nil {
				return &Error{Reason: ReasonInvalidValue, Message: fmt.Sprintf("%s: %v", rg.id, err)}
			}
			sf.Controls[i] = SavedHosted{Key: rg.id.Key(), Spec: spec, Value: v}
		}
		if r.closed.Load() {
			return storeError("form "+f.FormID, errClosed)
		}
		if err := r.store.SaveForm(ctx, sf); err != nil {
			return storeError("form "+f.FormID, err)
		}
	}
	r.installHosted(f, regs)
	return nil
}

// lockForm waits until no [Registry.Restore] runs and no other Host,
// Unhost or RefreshForm of formID does, and returns the function that lets
// them run again. Operations on other forms are not held up.
func (r *Registry) lockForm(formID string) (unlock func()) {
	r.hostMu.RLock()
	// Without an end to the wait, Lock cannot fail.
	unlockForm, _ := r.formLocks.Lock(context.Background(), formID)
	return func() {
		unlockForm()
		r.hostMu.RUnlock()
	}
}

// hostedRegistrations checks f and returns its controls' registrations,
// each with its Value.
func (r *Registry) hostedRegistrations(f HostedForm) ([]*registration, error) {
	if err := checkIdentifier("formId", f.FormID, false); err != nil {
		return nil, err
	}
	regs := make([]*registration, 0, len(f.Controls))
	seen := make(map[Key]bool, len(f.Controls))
	for i, c := range f.Controls {
		id := c.Identity
		switch id.FormID {
		case "":
			id.FormID = f.FormID
		case f.FormID:
		default:
			return nil, &Error{Reason: ReasonInvalidRequest, Message: fmt.Sprintf("controls[%d] names form %q inside form %q; leave its formId empty", i, id.FormID, f.FormID)}
		}
		v := NewValue(c.Value)
		if c.State != nil {
			v.SetState(*c.State)
		}
		rg, err := prepare(Registration{Identity: id, Metadata: c.Metadata, Handles: v.Handles()})
		if err != nil {
			e := err.(*Error)
			return nil, &Error{Reason: e.Reason, Message: fmt.Sprintf("controls[%d]: %s", i, e.Message)}
		}
		k := id.Key()
		if seen[k] {
			return nil, &Error{Reason: ReasonInvalidRequest, Message: fmt.Sprintf("controls[%d]: %s is declared twice", i, id)}
		}
		seen[k] = true
		rg.hosted = v
		regs = append(regs, rg)
	}
	return regs, nil
}

// installHosted registers regs as the hosted form f, unregistering the
// controls an earlier declaration had and f leaves out. Their saved state
// is already gone, so nothing is written.
func (r *Registry) installHosted(f HostedForm, regs []*registration) {
	keys := make([]Key, len(regs))
	for i, rg := range regs {
		keys[i] = rg.id.Key()
		r.install(rg)
	}
	r.mu.Lock()
	old := r.hosted[f.FormID]
	r.hosted[f.FormID] = &hostedForm{owner: f.Owner, private: f.Private, keys: keys}
	r.mu.Unlock()
	if old != nil {
		for _, k := range old.keys {
			if !slices.Contains(keys, k) {
				if s := r.lookup(k); s != nil {
					r.remove(s, nil, false)
				}
			}
		}
	}
}

// Unhost unregisters the hosted form formID and, with a [Persister],
// erases what was saved for it (first; nothing changes when that fails).
// It reports whether the form was hosted.
func (r *Registry) Unhost(ctx context.Context, formID string) (bool, error) {
	ctx = orBackground(ctx)
	defer r.lockForm(formID)()
	r.mu.Lock()
	hf := r.hosted[formID]
	r.mu.Unlock()
	if hf == nil {
		return false, nil
	}
	if r.persisting() {
		if r.closed.Load() {
			return false, storeError("the removal of form "+formID, errClosed)
		}
		if err := r.store.DeleteForm(ctx, formID); err != nil {
			return false, storeError("the removal of form "+formID, err)
		}
	}
	r.mu.Lock()
	delete(r.hosted, formID)
	r.mu.Unlock()
	for _, k := range hf.keys {
		if s := r.lookup(k); s != nil && s.reg.Load().hosted != nil {
			r.remove(s, nil, false)
		}
	}
	return true, nil
}

// HostedForms returns the hosted forms with their controls' current values,
// in the order they were first hosted.
func (r *Registry) HostedForms() []HostedForm {
	r.mu.Lock()
	type entry struct {
		id    string
		order uint64
		hf    *hostedForm
	}
	var forms []entry
	for id, hf := range r.hosted {
		var order uint64
		if len(hf.keys) > 0 {
			if s := r.lookup(hf.keys[0]); s != nil {
				order = s.order
			}
		}
		forms = append(forms, entry{id, order, hf})
	}
	r.mu.Unlock()
	slices.SortFunc(forms, func(a, b entry) int {
		if a.order != b.order {
			if a.order < b.order {
				return -1
			}
			return 1
		}
		if a.id < b.id {
			return -1
		}
		return 1
	})
	out := make([]HostedForm, 0, len(forms))
	for _, e := range forms {
		f := HostedForm{FormID: e.id, Owner: e.hf.owner, Private: e.hf.private}
		for _, k := range e.hf.keys {
			s := r.lookup(k)
			if s == nil {
				continue
			}
			rg := s.reg.Load()
			if rg.hosted == nil {
				continue
			}
			st, _ := rg.hosted.State(context.Background())
			hc := HostedControl{Identity: rg.id.clone(), Metadata: rg.md.clone(), Value: rg.hosted.Load()}
			if st != (State{}) {
				hc.State = &st
			}
			f.Controls = append(f.Controls, hc)
		}
		out = append(out, f)
	}
	return out
}

// SetHostedValue records an edit a person made to a hosted control in the
// application itself. It is not a command: it changes the live value, so a
// proposal staged before it becomes stale and undo will not overwrite it.
// With a [Persister] the value is saved first (a secret control's never
// is). It waits for a mutation of the control under way; the error, an
// [*Error], is not_found when id is not a hosted control, command_failed
// when ctx ends first, store_unavailable when the value cannot be saved.
func (r *Registry) SetHostedValue(ctx context.Context, id Identity, v any) error {
	ctx = orBackground(ctx)
	s := r.lookup(id.Key())
	if s == nil || s.reg.Load().hosted == nil {
		return &Error{Reason: ReasonNotFound, Message: fmt.Sprintf("no hosted control is registered as %s", id)}
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return &Error{Reason: ReasonCommandFailed, Message: "the edit of " + id.String() + " was cancelled while it waited for another change: " + ctx.Err().Error()}
	}
	defer func() { <-s.sem }()
	rg := s.reg.Load()
	if s.removed.Load() || rg.hosted == nil {
		return &Error{Reason: ReasonNotFound, Message: fmt.Sprintf("%s was unregistered before the edit could be recorded", id)}
	}
	if r.persisting() {
		raw := json.RawMessage("null")
		if !rg.secret {
			var err error
			if raw, err = encode(v); err != nil {
				return &Error{Reason: ReasonInvalidValue, Message: fmt.Sprintf("%s: %v", id, err)}
			}
		}
		if err := r.save(ctx, Update{Key: s.key, Value: raw}); err != nil {
			return storeError("the edit of "+id.String(), err)
		}
	}
	rg.hosted.Store(v)
	return nil
}

// Restore rebuilds the registry's durable state from its [Persister]: the
// highest revision handed out (so revisions are never reused), the hosted
// forms with their last values, and the open proposals and undo histories
// of controls. A control registered later — a screen's field, a Go
// application's control — finds its proposal and history when it
// registers; one registered already gets them now unless it has its own.
// It returns the hosted forms it registered.
//
// Call Restore once, on a new registry, before commands run. It waits for
// the Host, Unhost and RefreshForm under way, and those called meanwhile
// wait for it. Without a Persister it does nothing. The error, an
// [*Error], is store_unavailable when the store cannot be read,
// invalid_request when what it holds is damaged; the registry is then
// unchanged.
func (r *Registry) Restore(ctx context.Context) ([]HostedForm, error) {
	if !r.persisting() {
		return nil, nil
	}
	ctx = orBackground(ctx)
	r.hostMu.Lock()
	defer r.hostMu.Unlock()
	saved, err := r.store.LoadControls(ctx)
	if err != nil {
		return nil, &Error{Reason: ReasonStoreUnavailable, Message: fmt.Sprintf("the saved controls could not be read: %v; check the store and start again", err)}
	}
	damaged := func(what string, err error) *Error {
		return &Error{Reason: ReasonInvalidRequest, Message: fmt.Sprintf("the saved state of %s is damaged: %v", what, err)}
	}
	slots := make(map[Key]*restoredSlot, len(saved.Controls))
	for _, c := range saved.Controls {
		rs, err := restoredSlotOf(c)
		if err != nil {
			return nil, damaged(keyIdentity(c.Key).String(), err)
		}
		slots[c.Key] = rs
	}
	forms := make([]HostedForm, 0, len(saved.Forms))
	for _, sf := range saved.Forms {
		f, err := hostedFormOf(sf)
		if err != nil {
			return nil, damaged("form "+sf.FormID, err)
		}
		forms = append(forms, f)
	}
	regs := make([][]*registration, len(forms))
	for i, f := range forms {
		if regs[i], err = r.hostedRegistrations(f); err != nil {
			return nil, damaged("form "+f.FormID, err)
		}
	}

	r.raiseRevision(saved.Revision)
	r.mu.Lock()
	for k, rs := range slots {
		if s := r.lookup(k); s != nil {
			r.adopt(s, rs)
			continue
		}
		r.restored[k] = rs
	}
	r.mu.Unlock()
	for i, f := range forms {
		r.installHosted(f, regs[i])
	}
	return forms, nil
}

// restoredSlotOf decodes the saved proposal and undo history of c.
func restoredSlotOf(c SavedControl) (*restoredSlot, error) {
	rs := &restoredSlot{}
	if p := c.Proposal; p != nil {
		v, err := decode(p.Value)
		if err != nil {
			return nil, err
		}
		b, err := decode(p.Base)
		if err != nil {
			return nil, err
		}
		rs.staged = &staged{value: v, base: b, prop: Proposal{Revision: p.Revision, Provenance: p.Provenance, StagedAt: p.StagedAt, Why: p.Why}}
	}
	for _, h := range c.History {
		p, err := decode(h.Previous)
		if err != nil {
			return nil, err
		}
		a, err := decode(h.Applied)
		if err != nil {
			return nil, err
		}
		rs.hist = append(rs.hist, undoEntry{action: h.Action, previous: p, applied: a, prov: h.Provenance, at: h.At})
	}
	return rs, nil
}

// Refresh makes the control k show what its [Persister] holds now: the
// open proposal, the undo history and, for a hosted control, the value.
// It is for registries on several nodes that share one store: when
// another node changed k, Refresh brings this registry up to date. It
// waits for a change of k in progress here, then reads k from the store
// (with [ControlLoader.LoadControl] when the Persister has it, or else
// everything with LoadControls); it does not save.
//
// Without a Persister it does nothing; for a k not registered here it
// only updates what a control registering later finds (as after Restore).
// The error, an [*Error], is store_unavailable when the store cannot be
// read.
func (r *Registry) Refresh(ctx context.Context, k Key) error {
	if !r.persisting() {
		return nil
	}
	ctx = orBackground(ctx)
	s := r.lookup(k)
	if s == nil {
		l, err := r.loadOne(ctx, k)
		if err != nil {
			return err
		}
		r.raiseRevision(l.revision)
		r.mu.Lock()
		if _, waiting := r.restored[k]; waiting {
			r.restored[k] = l.rs
		}
		r.mu.Unlock()
		return nil
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return &Error{Reason: ReasonCommandFailed, Message: "refreshing " + keyIdentity(k).String() + " was cancelled while it waited for another change: " + ctx.Err().Error()}
	}
	defer func() { <-s.sem }()
	if err := r.reload(ctx, s); err != nil {
		return err
	}
	return nil
}

// loaded is the decoded saved state of one control.
type loaded struct {
	revision int64
	rs       *restoredSlot
	// hosted is the saved value of a hosted control; hasValue reports
	// that there is one.
	hosted   any
	hasValue bool
}

// loadOne reads the saved state of the control k.
func (r *Registry) loadOne(ctx context.Context, k Key) (loaded, *Error) {
	var lc LoadedControl
	if cl, ok := r.store.(ControlLoader); ok {
		var err error
		if lc, err = cl.LoadControl(ctx, k); err != nil {
			return loaded{}, &Error{Reason: ReasonStoreUnavailable, Message: fmt.Sprintf("the saved state of %s could not be read: %v; try again", keyIdentity(k), err)}
		}
	} else {
		saved, err := r.store.LoadControls(ctx)
		if err != nil {
			return loaded{}, &Error{Reason: ReasonStoreUnavailable, Message: fmt.Sprintf("the saved state of %s could not be read: %v; try again", keyIdentity(k), err)}
		}
		if lc, err = loadedControlOf(saved, k); err != nil {
			return loaded{}, &Error{Reason: ReasonInvalidRequest, Message: fmt.Sprintf("the saved value of %s is damaged: %v", keyIdentity(k), err)}
		}
	}
	rs, err := restoredSlotOf(lc.Control)
	if err != nil {
		return loaded{}, &Error{Reason: ReasonInvalidRequest, Message: fmt.Sprintf("the saved state of %s is damaged: %v", keyIdentity(k), err)}
	}
	l := loaded{revision: lc.Revision, rs: rs}
	if lc.Hosted {
		if l.hosted, err = decode(lc.Value); err != nil {
			return loaded{}, &Error{Reason: ReasonInvalidRequest, Message: fmt.Sprintf("the saved value of %s is damaged: %v", keyIdentity(k), err)}
		}
		l.hasValue = true
	}
	return l, nil
}

// reload reads the saved state of s from the store and makes s show it.
// The caller holds s.sem.
func (r *Registry) reload(ctx context.Context, s *slot) *Error {
	l, err := r.loadOne(ctx, s.key)
	if err != nil {
		return err
	}
	r.raiseRevision(l.revision)
	r.show(s, l)
	return nil
}

// show makes s hold the loaded state l. The caller holds s.sem.
func (r *Registry) show(s *slot, l loaded) {
	rg := s.reg.Load()
	if l.rs.staged != nil && !rg.secret {
		s.staged.Store(l.rs.staged)
	} else {
		s.staged.Store(nil)
	}
	s.mu.Lock()
	s.hist = history{}
	for _, e := range l.rs.hist {
		s.hist.push(e, r.depth)
	}
	s.mu.Unlock()
	if rg.hosted != nil && l.hasValue && !rg.secret {
		rg.hosted.Store(l.hosted)
	}
}

// raiseRevision makes the next revision handed out higher than rev.
func (r *Registry) raiseRevision(rev int64) {
	for {
		cur := r.revision.Load()
		if rev <= cur || r.revision.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// loadedControlOf picks the saved state of k out of everything saved.
func loadedControlOf(saved Saved, k Key) (LoadedControl, error) {
	lc := LoadedControl{Revision: saved.Revision, Control: SavedControl{Key: k}}
	for _, c := range saved.Controls {
		if c.Key == k {
			lc.Control = c
			break
		}
	}
	for _, sf := range saved.Forms {
		if sf.FormID != k.FormID {
			continue
		}
		for _, sh := range sf.Controls {
			if sh.Key == k {
				lc.Hosted, lc.Value = true, sh.Value
				return lc, nil
			}
		}
	}
	return lc, nil
}

// RefreshForm makes the hosted form formID here what the [Persister] holds
// now, for registries on several nodes that share one store: a form
// another node declared is hosted here too, with its saved values,
// proposals and undo histories; one it redeclared is replaced; one it
// removed is unhosted here (its controls unregistered, nothing erased).
// It reads the form with [FormLoader.LoadForm] when the Persister has it,
// or else everything with LoadControls, and does not save.
//
// It returns the form as saved and whether the store holds it. Without a
// Persister it does nothing. The error, an [*Error], is store_unavailable
// when the store cannot be read, invalid_request when what it holds for
// the form is damaged.
func (r *Registry) RefreshForm(ctx context.Context, formID string) (HostedForm, bool, error) {
	if !r.persisting() {
		return HostedForm{}, false, nil
	}
	ctx = orBackground(ctx)
	defer r.lockForm(formID)()
	var saved Saved
	var err error
	if fl, ok := r.store.(FormLoader); ok {
		saved, err = fl.LoadForm(ctx, formID)
	} else if saved, err = r.store.LoadControls(ctx); err == nil {
		saved = formOf(saved, formID)
	}
	if err != nil {
		return HostedForm{}, false, &Error{Reason: ReasonStoreUnavailable, Message: fmt.Sprintf("the saved form %s could not be read: %v; try again", formID, err)}
	}
	r.raiseRevision(saved.Revision)
	if len(saved.Forms) == 0 {
		r.mu.Lock()
		hf := r.hosted[formID]
		delete(r.hosted, formID)
		r.mu.Unlock()
		if hf != nil {
			for _, k := range hf.keys {
				if s := r.lookup(k); s != nil && s.reg.Load().hosted != nil {
					r.remove(s, nil, false)
				}
			}
		}
		return HostedForm{}, false, nil
	}
	damaged := func(err error) *Error {
		return &Error{Reason: ReasonInvalidRequest, Message: fmt.Sprintf("the saved state of form %s is damaged: %v", formID, err)}
	}
	f, err := hostedFormOf(saved.Forms[0])
	if err != nil {
		return HostedForm{}, false, damaged(err)
	}
	regs, err := r.hostedRegistrations(f)
	if err != nil {
		return HostedForm{}, false, damaged(err)
	}
	states := make(map[Key]*restoredSlot, len(saved.Controls))
	for _, c := range saved.Controls {
		rs, err := restoredSlotOf(c)
		if err != nil {
			return HostedForm{}, false, damaged(err)
		}
		states[c.Key] = rs
	}
	// A control new here adopts its saved state as it registers; one
	// registered already is shown its saved state once installed.
	var present []Key
	r.mu.Lock()
	for _, rg := range regs {
		k := rg.id.Key()
		if r.lookup(k) != nil {
			present = append(present, k)
			continue
		}
		if rs := states[k]; rs != nil {
			r.restored[k] = rs
		} else {
			delete(r.restored, k)
		}
	}
	r.mu.Unlock()
	r.installHosted(f, regs)
	for _, k := range present {
		s := r.lookup(k)
		if s == nil {
			continue
		}
		rs := states[k]
		if rs == nil {
			rs = &restoredSlot{}
		}
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			return HostedForm{}, false, &Error{Reason: ReasonCommandFailed, Message: "refreshing form " + formID + " was cancelled while it waited for another change: " + ctx.Err().Error()}
		}
		r.show(s, loaded{rs: rs})
		<-s.sem
	}
	return f, true, nil
}

// formOf keeps, of everything saved, the hosted form formID and the saved
// state of the controls of that form id.
func formOf(saved Saved, formID string) Saved {
	out := Saved{Revision: saved.Revision}
	for _, sf := range saved.Forms {
		if sf.FormID == formID {
			out.Forms = append(out.Forms, sf)
		}
	}
	for _, c := range saved.Controls {
		if c.Key.FormID == formID {
			out.Controls = append(out.Controls, c)
		}
	}
	return out
}

// hostedFormOf decodes a saved hosted form.
func hostedFormOf(sf SavedForm) (HostedForm, error) {
	f := HostedForm{FormID: sf.FormID, Owner: sf.Owner, Private: sf.Private}
	for _, sh := range sf.Controls {
		var spec hostedSpec
		if err := json.Unmarshal(sh.Spec, &spec); err != nil {
			return HostedForm{}, err
		}
		v, err := decode(sh.Value)
		if err != nil {
			return HostedForm{}, err
		}
		f.Controls = append(f.Controls, HostedControl{Identity: spec.Identity, Metadata: spec.Metadata, Value: v, State: spec.State})
	}
	return f, nil
}

// adopt gives s the restored state rs unless s has a proposal or history
// of its own. It runs with r.mu held.
func (r *Registry) adopt(s *slot, rs *restoredSlot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.staged.Load() != nil || s.hist.n > 0 {
		return
	}
	if rs.staged != nil && !s.reg.Load().secret {
		s.staged.Store(rs.staged)
	}
	for _, e := range rs.hist {
		s.hist.push(e, r.depth)
	}
}

// keyIdentity returns the identity k stands for, without a subject label.
func keyIdentity(k Key) Identity {
	id := Identity{FormID: k.FormID, ControlID: k.ControlID}
	if k.HasSubject {
		id.Subject = &Subject{Type: k.SubjectType, ID: k.SubjectID}
	}
	return id
}
