package control

import (
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/assent-run/assent/internal/keylock"
)

// Handles are the small imperative functions through which the registry
// reaches a control. Every handle is optional; the control's capabilities
// follow from which ones are set. Any handle may block, so each receives
// the context of the call that needs it. Handles must be safe for
// concurrent use and must not call back into the registry for the same
// control.
type Handles struct {
	// GetValue returns the live value.
	GetValue func(ctx context.Context) (any, error)
	// SetValue writes a value.
	SetValue func(ctx context.Context, value any) error
	// Clear empties the control. Without it, clear writes "" with SetValue.
	Clear func(ctx context.Context) error
	// Focus moves keyboard focus to the control.
	Focus func(ctx context.Context) error
	// Reveal scrolls the control into view.
	Reveal func(ctx context.Context) error
	// Highlight draws attention to the control for d, or for the control's
	// own default when d is 0.
	Highlight func(ctx context.Context, d time.Duration) error
	// Validate checks the value and shows the outcome to the person. The
	// registry ignores the boolean; validity is read through GetState.
	Validate func(ctx context.Context) (bool, error)
	// GetState returns the runtime state.
	GetState func(ctx context.Context) (State, error)
}

// Registration is what an adapter registers: a control's identity, its
// metadata and its handles.
type Registration struct {
	Identity Identity
	Metadata Metadata
	Handles
}

// Defaults for [Config].
const (
	DefaultHistoryDepth = 100
	DefaultEventQueue   = 1024
)

// Config configures a [Registry]. The zero value is ready to use.
type Config struct {
	// Policy, when set, runs after the default policy allows a command and
	// may refuse it.
	Policy Policy
	// Now is the clock for event timestamps, proposals and changes.
	// Default time.Now.
	Now func() time.Time
	// HistoryDepth bounds each control's undo history; the oldest entry is
	// dropped when it is full. 0 means DefaultHistoryDepth; a negative
	// value keeps no history, so undo always finds nothing to undo.
	HistoryDepth int
	// EventQueue is the number of events each subscriber may have waiting
	// before newer ones are dropped. 0 means DefaultEventQueue.
	EventQueue int
	// Store, when set, keeps proposals, undo histories and hosted forms
	// across restarts: every change is written through to it before it
	// takes effect, and [Registry.Restore] reads it back. Without it the
	// registry keeps everything in memory only.
	Store Persister
}

// Registry holds the registered controls of an application and runs
// commands on them. It is safe for concurrent use and performs no I/O of its
// own; only the controls' handles, the subscribers and the optional
// [Persister] do anything outside it.
type Registry struct {
	policy Policy
	now    func() time.Time
	depth  int
	store  Persister
	closed atomic.Bool

	events hub

	// revision numbers proposals. It sits on its own cache line because
	// every stage writes it while every command reads the fields above.
	_        [64]byte
	revision atomic.Int64
	_        [56]byte

	// shards map identities to slots; a lookup locks one shard only, so
	// commands on different controls do not contend.
	seed   maphash.Seed
	shards [shardCount]shard

	// mu orders registrations and removals and guards the lists below.
	mu        sync.Mutex
	all       orderedSlots
	forms     map[string]*orderedSlots
	nextOrder uint64
	// hosted maps the id of a hosted form to its declaration; restored
	// holds the saved state of controls that have not registered since
	// Restore.
	hosted   map[string]*hostedForm
	restored map[Key]*restoredSlot

	// hostMu lets Restore run alone: Restore holds it for writing, while
	// Host, Unhost and RefreshForm hold it for reading and then lock their
	// form id in formLocks. Operations on one form thus run one at a time,
	// and those on different forms run at once.
	hostMu    sync.RWMutex
	formLocks keylock.Map
}

const shardCount = 32

type shard struct {
	mu sync.RWMutex
	m  map[Key]*slot
	_  [32]byte // keep shards on separate cache lines
}

// shard picks the shard of k by its control id, which is cheap to hash
// and spreads the controls of one form.
func (r *Registry) shard(k Key) *shard {
	return &r.shards[maphash.String(r.seed, k.ControlID)%shardCount]
}

// lookup returns the slot registered under k, or nil.
func (r *Registry) lookup(k Key) *slot {
	sh := r.shard(k)
	sh.mu.RLock()
	s := sh.m[k]
	sh.mu.RUnlock()
	return s
}

// New returns an empty registry configured by cfg.
func New(cfg Config) *Registry {
	r := &Registry{
		policy: cfg.Policy,
		now:    cfg.Now,
		depth:  cfg.HistoryDepth,
		store:  cfg.Store,
		seed:   maphash.MakeSeed(),
		forms:  make(map[string]*orderedSlots),
		hosted: make(map[string]*hostedForm),
	}
	if r.store != nil {
		r.restored = make(map[Key]*restoredSlot)
	}
	for i := range r.shards {
		r.shards[i].m = make(map[Key]*slot)
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.depth == 0 {
		r.depth = DefaultHistoryDepth
	}
	q := cfg.EventQueue
	if q <= 0 {
		q = DefaultEventQueue
	}
	r.events = hub{now: r.now, queue: q}
	return r
}

// registration is an accepted Registration in the form the registry uses.
type registration struct {
	id Identity
	// md is the registry's own copy; Capabilities holds the effective list.
	// Snapshots share its slices and pointers, so decisions never read it:
	// they use the fields below, fixed at registration.
	md       Metadata
	h        Handles
	caps     capSet
	redacted bool
	secret   bool
	writable bool
	// values checks proposed and explicitly applied values against md.
	values *valueChecker
	// hosted holds the value of a control of a hosted form.
	hosted *Value
}

// slot is the registry's place for one identity. It outlives a replacing
// registration, so the staged proposal and the undo history survive a
// control registering again, and disappears on unregister.
type slot struct {
	key   Key
	order uint64
	// sem serializes the mutations of one control: a mutation holds it
	// while it calls the control's handles.
	sem chan struct{}

	// reg and removed change only with Registry.mu held.
	reg     atomic.Pointer[registration]
	removed atomic.Bool

	// staged is the open proposal; it is written only by a mutation holding
	// sem, or by removal and replacement.
	staged atomic.Pointer[staged]

	mu   sync.Mutex // guards hist
	hist history

	// applying is set while an apply of the staged proposal is under
	// way: the live value may already be the proposed one, and the
	// proposal is not stale for it.
	applying atomic.Bool
}

type staged struct {
	value any
	base  any // the live value when the proposal was staged
	prop  Proposal
}

type undoEntry struct {
	action   Action
	previous any
	applied  any
	prov     Provenance
	at       time.Time
}

// history is a bounded stack kept in a ring buffer.
type history struct {
	buf      []undoEntry
	start, n int
}

func (h *history) push(e undoEntry, depth int) {
	switch {
	case depth <= 0:
	case h.n == depth: // full: drop the oldest
		h.buf[h.start] = e
		h.start = (h.start + 1) % len(h.buf)
	case h.n < len(h.buf):
		h.buf[(h.start+h.n)%len(h.buf)] = e
		h.n++
	default: // the buffer has never wrapped, so start is 0
		h.buf = append(h.buf, e)
		h.n++
	}
}

func (h *history) top() (undoEntry, bool) {
	if h.n == 0 {
		return undoEntry{}, false
	}
	return h.buf[(h.start+h.n-1)%len(h.buf)], true
}

func (h *history) pop() {
	if h.n == 0 {
		return
	}
	h.buf[(h.start+h.n-1)%len(h.buf)] = undoEntry{}
	h.n--
}

// orderedSlots keeps slots in registration order. Removed slots stay as
// tombstones until they make up half of the list.
type orderedSlots struct {
	items []*slot
	dead  int
}

func (o *orderedSlots) add(s *slot) { o.items = append(o.items, s) }

func (o *orderedSlots) removed() {
	o.dead++
	if o.dead > len(o.items)/2 {
		o.items = slices.DeleteFunc(o.items, func(s *slot) bool { return s.removed.Load() })
		o.dead = 0
	}
}

func (o *orderedSlots) live() int { return len(o.items) - o.dead }

// deriveCapabilities computes the effective capabilities of a registration.
func deriveCapabilities(md *Metadata, h *Handles) []Capability {
	var caps []Capability
	if md.Capabilities != nil {
		caps = make([]Capability, 0, len(md.Capabilities))
		for _, c := range md.Capabilities {
			if !slices.Contains(caps, c) {
				caps = append(caps, c)
			}
		}
	} else {
		caps = append(caps, CapExplain)
		if h.GetValue != nil && md.IsReadable() {
			caps = append(caps, CapRead)
		}
		if h.Focus != nil {
			caps = append(caps, CapFocus)
		}
		if h.Reveal != nil {
			caps = append(caps, CapReveal)
		}
		if h.Highlight != nil {
			caps = append(caps, CapHighlight)
		}
		if h.Validate != nil {
			caps = append(caps, CapValidate)
		}
		if h.SetValue != nil && md.IsWritable() {
			caps = append(caps, CapStage, CapApply, CapUndo)
		}
		if (h.Clear != nil || h.SetValue != nil) && md.IsWritable() {
			caps = append(caps, CapClear)
		}
		if h.SetValue != nil && md.IsWritable() {
			caps = append(caps, CapDiscard)
		}
	}
	if md.IsSecret() {
		caps = slices.DeleteFunc(caps, func(c Capability) bool { return capBit(c)&secretMask != 0 })
	}
	return caps
}

// Register adds a control, or replaces the registration that has the same
// identity, and emits a registered event. A replaced control keeps its
// staged proposal (unless it is now secret) and its undo history.
//
// It returns a function that unregisters the control; that function does
// nothing if the identity has since been registered again or removed. The
// error, always an [*Error], reports an invalid identity or metadata.
func (r *Registry) Register(reg Registration) (unregister func(), err error) {
	rg, err := prepare(reg)
	if err != nil {
		return nil, err
	}
	s := r.install(rg)
	return func() { r.remove(s, rg, true) }, nil
}

// install registers rg, creating its slot (with any restored state) or
// replacing the registration of an existing one, and returns the slot.
func (r *Registry) install(rg *registration) *slot {
	key := rg.id.Key()
	r.mu.Lock()
	sh := r.shard(key)
	s := r.lookup(key)
	if s == nil {
		r.nextOrder++
		s = &slot{key: key, order: r.nextOrder, sem: make(chan struct{}, 1)}
		s.reg.Store(rg)
		sh.mu.Lock()
		sh.m[key] = s
		sh.mu.Unlock()
		r.all.add(s)
		f := r.forms[key.FormID]
		if f == nil {
			f = &orderedSlots{}
			r.forms[key.FormID] = f
		}
		f.add(s)
		if rs := r.restored[key]; rs != nil {
			delete(r.restored, key)
			r.adopt(s, rs)
		}
	}
	s.reg.Store(rg)
	if rg.secret {
		s.staged.Store(nil) // a secret control holds no proposal
	}
	r.events.emit(Event{Type: EventRegistered, Identity: rg.id.clone()})
	r.mu.Unlock()
	return s
}

// Unregister removes the control registered under id, with its staged
// proposal and undo history, and emits an unregistered event. It reports
// whether a control was removed; an unknown identity emits nothing.
//
// With a [Persister] the saved proposal and history are erased too, unless
// the registry is closed. If the store cannot be reached the control is
// removed all the same and what was saved stays: it comes back when a
// control registers under the same identity after a restart.
func (r *Registry) Unregister(id Identity) bool {
	s := r.lookup(id.Key())
	if s == nil {
		return false
	}
	return r.remove(s, nil, true)
}

// remove deletes s when it is still registered and, if only is not nil,
// still holds that registration. forget erases its saved state too, after
// any mutation under way has finished, so none saves state afterwards.
func (r *Registry) remove(s *slot, only *registration, forget bool) bool {
	forget = forget && r.persisting() && !r.closed.Load()
	if forget {
		s.sem <- struct{}{}
		defer func() { <-s.sem }()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.removed.Load() || (only != nil && s.reg.Load() != only) {
		return false
	}
	if forget {
		_ = r.store.ForgetControl(context.Background(), s.key)
	}
	sh := r.shard(s.key)
	sh.mu.Lock()
	delete(sh.m, s.key)
	sh.mu.Unlock()
	s.removed.Store(true)
	s.staged.Store(nil)
	s.mu.Lock()
	s.hist = history{}
	s.mu.Unlock()
	id := s.reg.Load().id.clone()
	r.all.removed()
	if f := r.forms[s.key.FormID]; f != nil {
		f.removed()
		if f.live() == 0 {
			delete(r.forms, s.key.FormID)
		}
	}
	r.events.emit(Event{Type: EventUnregistered, Identity: id})
	return true
}

// entries returns the live slots of formID ("" for every form) in
// registration order, each with its current registration.
func (r *Registry) entries(formID string) ([]*slot, []*registration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	src := &r.all
	if formID != "" {
		src = r.forms[formID]
		if src == nil {
			return nil, nil
		}
	}
	slots := make([]*slot, 0, src.live())
	regs := make([]*registration, 0, src.live())
	for _, s := range src.items {
		if !s.removed.Load() {
			slots = append(slots, s)
			regs = append(regs, s.reg.Load())
		}
	}
	return slots, regs
}

// List returns snapshots of the controls of formID, or of every control
// when formID is "", in registration order (a replaced registration keeps
// its place). A control whose value or state cannot be read is listed with
// its value redacted or its state empty.
func (r *Registry) List(ctx context.Context, formID string) []Snapshot {
	ctx = orBackground(ctx)
	slots, regs := r.entries(formID)
	out := make([]Snapshot, len(slots))
	for i, s := range slots {
		_ = r.fill(ctx, s, regs[i], false, &out[i])
	}
	return out
}

// Get returns the snapshot of the control registered under exactly id.
func (r *Registry) Get(ctx context.Context, id Identity) (Snapshot, bool) {
	ctx = orBackground(ctx)
	s := r.lookup(id.Key())
	if s == nil {
		return Snapshot{}, false
	}
	reg := s.reg.Load()
	snap, _ := r.snapshot(ctx, s, reg, false)
	return snap, true
}

// Proposals returns snapshots of the controls of formID ("" for all) that
// have a staged proposal, in registration order. Each snapshot's
// State.Staged carries the proposal's provenance, revision and staleness;
// State.StagedValue is hidden where the control is redacted.
func (r *Registry) Proposals(ctx context.Context, formID string) []Snapshot {
	ctx = orBackground(ctx)
	slots, regs := r.entries(formID)
	out := []Snapshot{}
	for i, s := range slots {
		if s.staged.Load() == nil {
			continue
		}
		snap, _ := r.snapshot(ctx, s, regs[i], false)
		if snap.State.Staged != nil {
			out = append(out, snap)
		}
	}
	return out
}

// Changes returns, for each control of formID ("" for all) with a
// non-empty undo history, the change its next undo would reverse, newest
// first. Values are hidden where the control is redacted.
func (r *Registry) Changes(ctx context.Context, formID string) []Change {
	ctx = orBackground(ctx)
	slots, regs := r.entries(formID)
	out := []Change{}
	var order []uint64
	for i, s := range slots {
		s.mu.Lock()
		e, ok := s.hist.top()
		depth := s.hist.n
		s.mu.Unlock()
		if !ok {
			continue
		}
		reg := regs[i]
		c := Change{
			Identity:      reg.id.clone(),
			Label:         reg.md.Label,
			Action:        e.action,
			ValueRedacted: reg.redacted,
			Provenance:    e.prov,
			At:            e.at,
			Depth:         depth,
		}
		if !reg.redacted {
			c.Previous, c.Applied = e.previous, e.applied
		}
		if reg.h.GetValue != nil {
			if live, err := callGet(ctx, reg.h.GetValue); err == nil {
				c.Stale = !Equal(live, e.applied)
			}
		}
		out = append(out, c)
		order = append(order, s.order)
	}
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if c := out[b].At.Compare(out[a].At); c != 0 {
			return c
		}
		return cmp.Compare(order[a], order[b])
	})
	sorted := make([]Change, len(out))
	for i, j := range idx {
		sorted[i] = out[j]
	}
	return sorted
}

// snapshot returns the snapshot of s under reg.
func (r *Registry) snapshot(ctx context.Context, s *slot, reg *registration, strict bool) (Snapshot, error) {
	var snap Snapshot
	err := r.fill(ctx, s, reg, strict, &snap)
	return snap, err
}

// fill writes the snapshot of s under reg into dst. The metadata's slices
// and pointers are shared with the registration. When strict is false a
// failing handle is reported as a redacted value or an empty state instead
// of an error.
func (r *Registry) fill(ctx context.Context, s *slot, reg *registration, strict bool, dst *Snapshot) error {
	*dst = Snapshot{Identity: reg.id.clone(), Metadata: reg.md}
	if reg.h.GetState != nil {
		st, err := callState(ctx, reg.h.GetState)
		if err != nil {
			if strict {
				return err
			}
		} else {
			dst.State.State = st
			if st.Valid != nil {
				dst.State.Valid = Bool(*st.Valid)
			}
		}
	}
	sv := s.staged.Load()

	var live any
	liveOK := true
	if reg.h.GetValue != nil && (!reg.redacted || sv != nil) {
		v, err := callGet(ctx, reg.h.GetValue)
		if err != nil {
			if strict {
				return err
			}
			liveOK = false
		}
		live = v
	}
	st := &dst.State
	st.ValueRedacted = reg.redacted || !liveOK
	if st.ValueRedacted {
		st.ValidationMessage = ""
	} else {
		st.Value = live
	}
	if sv != nil {
		prop := new(Proposal)
		*prop = sv.prop
		prop.Stale = reg.h.GetValue != nil && liveOK && !Equal(live, sv.base) && !s.applying.Load()
		st.Staged = prop
		if st.ValueRedacted {
			st.StagedValueRedacted = true
		} else {
			st.StagedValue = sv.value
		}
	}
	return nil
}

// Subscribe calls fn with every event the registry emits from now on, in
// order, and returns a function that stops the subscription.
//
// Each subscriber has its own goroutine and a queue of Config.EventQueue
// events. Emitting never waits: when the queue is full the event is dropped
// for that subscriber and counted in the Dropped field of the next event it
// does receive. A panic in fn is recovered and the subscription goes on. So
// a slow or faulty subscriber never blocks a command or changes its result.
// After the stop function returns, fn is not called again, except that a
// call already under way finishes; fn may call the stop function itself.
func (r *Registry) Subscribe(fn func(Event)) (unsubscribe func()) {
	if fn == nil {
		return func() {}
	}
	return r.events.subscribe(fn)
}

// Execute runs cmd on its control on behalf of the issuer cc and reports
// the outcome; it never panics and never returns an error other than in the
// Result.
//
// The checks run in this order: the command's shape (invalid_request); the
// identity (not_found for any identity that is not registered); the default
// policy; Config.Policy; the control's capability for the action
// (unsupported); then the action itself.
//
// The default policy concerns only mutations (stage, apply, clear, undo and
// discard) and checks, in this order: a secret control refuses with
// sensitive_control, a non-writable one with control_not_writable, a
// disabled or read-only one with control_not_editable; then an agent's
// apply, clear, undo or discard is refused with human_confirmation_required
// whatever Confirmed says, and any other source's apply, clear, undo or
// discard without Confirmed is refused with consent_required. Staging needs
// no confirmation.
//
// Mutations of one control run one at a time; a mutation waiting for its
// turn gives up with command_failed when ctx is done. Every outcome except
// invalid_request and not_found emits a command event.
func (r *Registry) Execute(ctx context.Context, cmd Command, cc CommandContext) Result {
	ctx = orBackground(ctx)
	cc = cc.normalize()
	res := Result{Action: cmd.Action, Identity: cmd.Identity.clone()}
	if err := cmd.validate(); err != nil {
		res.Reason, res.Message = err.Reason, err.Message
		return res
	}
	if !cc.Source.Valid() {
		res.Reason = ReasonInvalidRequest
		res.Message = fmt.Sprintf("source %q is unknown; use user, voice, agent, tutorial or test", cc.Source)
		return res
	}

	s := r.lookup(cmd.Identity.Key())
	if s == nil {
		res.Reason = ReasonNotFound
		res.Message = fmt.Sprintf("no control is registered as %s; list the form's controls to find the right identity", cmd.Identity)
		return res
	}

	reg := s.reg.Load()
	x := execution{r: r, ctx: ctx, s: s, reg: reg, cmd: cmd, cc: cc, res: res}
	if cmd.Action.IsMutation() {
		select {
		case s.sem <- struct{}{}:
		default:
			// Another mutation of this control is running: wait for it.
			select {
			case s.sem <- struct{}{}:
			case <-ctx.Done():
				x.res.Reason = ReasonCommandFailed
				x.res.Message = "the command was cancelled while it waited for another change to " + cmd.Identity.String() + " to finish: " + ctx.Err().Error()
				x.res.Snapshot, _ = r.snapshot(ctx, s, reg, false)
				return x.finish()
			}
		}
		defer func() { <-s.sem }()
		// The registration may have been replaced or removed meanwhile.
		x.reg = s.reg.Load()
		if s.removed.Load() {
			res.Reason = ReasonNotFound
			res.Message = fmt.Sprintf("%s was unregistered before the command could run", cmd.Identity)
			return res
		}
	}
	return x.run()
}

// execution carries one command through Execute.
type execution struct {
	r   *Registry
	ctx context.Context
	s   *slot
	reg *registration
	cmd Command
	cc  CommandContext
	res Result
}

func (x *execution) run() Result {
	// The default policy needs the runtime state of a mutated control; a
	// custom policy and explain need the whole snapshot. Other commands
	// read nothing before they run.
	var state State
	if x.r.policy != nil || x.cmd.Action == Explain {
		if err := x.r.fill(x.ctx, x.s, x.reg, true, &x.res.Snapshot); err != nil {
			x.res.Snapshot = Snapshot{}
			return x.failed(err)
		}
		state = x.res.Snapshot.State.State
	} else if x.cmd.Action.IsMutation() && !x.reg.secret && x.reg.writable && x.reg.h.GetState != nil {
		st, err := callState(x.ctx, x.reg.h.GetState)
		if err != nil {
			return x.failed(err)
		}
		state = st
	}
	if reason := defaultPolicy(x.cmd.Action, x.cc, x.reg, &state); reason != "" {
		return x.refuse(reason, policyMessage(reason, x.cmd.Action, x.reg))
	}
	if x.r.policy != nil {
		d, err := x.customPolicy(x.res.Snapshot)
		if err != nil {
			return x.failed(err)
		}
		if !d.Allowed {
			reason, msg := d.Reason, d.Message
			if reason == "" {
				reason = ReasonDenied
			}
			if msg == "" {
				msg = fmt.Sprintf("the application's policy does not allow %s on %s", x.cmd.Action, x.reg.id)
			}
			return x.refuse(reason, msg)
		}
	}
	if !x.reg.caps.has(Capability(x.cmd.Action)) {
		return x.unsupported()
	}
	return x.act()
}

func (x *execution) customPolicy(snap Snapshot) (d Decision, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the policy panicked: %v", p)
		}
	}()
	cmd := x.cmd
	cmd.Identity = cmd.Identity.clone()
	if x.reg.redacted {
		cmd.Value = nil
	}
	return x.r.policy(x.ctx, cmd, x.cc, snap), nil
}

// defaultPolicy applies the registry's own rules to action on a control
// in state; it returns an empty reason to allow.
func defaultPolicy(a Action, cc CommandContext, reg *registration, state *State) Reason {
	if !a.IsMutation() {
		return ""
	}
	switch {
	case reg.secret:
		return ReasonSensitiveControl
	case !reg.writable:
		return ReasonNotWritable
	case !state.editable():
		return ReasonNotEditable
	}
	switch {
	case a == Stage:
		return ""
	case cc.Source == SourceAgent:
		return ReasonHumanConfirmationRequired
	case !cc.Confirmed:
		return ReasonConsentRequired
	}
	return ""
}

// policyMessage explains a refusal of the default policy.
func policyMessage(reason Reason, a Action, reg *registration) string {
	id := reg.id.String()
	switch reason {
	case ReasonSensitiveControl:
		return id + " is secret, so its value cannot be staged or changed through the registry; the person must enter it in the application"
	case ReasonNotWritable:
		return id + " is not writable; its value cannot be changed"
	case ReasonNotEditable:
		return id + " is disabled or read-only right now; it must become editable before its value can change"
	case ReasonHumanConfirmationRequired:
		return "an agent cannot " + string(a) + " " + id + "; stage the value and ask a person to review it in the inbox"
	case ReasonConsentRequired:
		return string(a) + " on " + id + " needs the person's confirmation; ask them and send the command again as confirmed"
	}
	return string(reason)
}

func (x *execution) act() Result {
	ctx, h := x.ctx, &x.reg.h
	var err error
	switch x.cmd.Action {
	case Explain:
		x.res.OK = true
		return x.finish() // the snapshot was taken before
	case Focus:
		if h.Focus == nil {
			return x.unsupported()
		}
		err = call(func() error { return h.Focus(ctx) })
	case Reveal:
		if h.Reveal == nil {
			return x.unsupported()
		}
		err = call(func() error { return h.Reveal(ctx) })
	case Highlight:
		if h.Highlight == nil {
			return x.unsupported()
		}
		d := time.Duration(x.cmd.DurationMs) * time.Millisecond
		err = call(func() error { return h.Highlight(ctx, d) })
	case Validate:
		if h.Validate == nil {
			return x.unsupported()
		}
		err = call(func() error { _, err := h.Validate(ctx); return err })
	case Stage:
		return x.stage()
	case Apply:
		return x.apply()
	case Clear:
		return x.clear()
	case Undo:
		return x.undo()
	case Discard:
		return x.discard()
	}
	if err != nil {
		return x.failed(err)
	}
	return x.succeed()
}

func (x *execution) provenance() Provenance {
	return Provenance{Source: x.cc.Source, PrincipalID: x.cc.PrincipalID, SessionID: x.cc.SessionID}
}

// live reads the control's value, or nil when it has no GetValue handle.
func (x *execution) live() (any, error) {
	if x.reg.h.GetValue == nil {
		return nil, nil
	}
	return callGet(x.ctx, x.reg.h.GetValue)
}

func (x *execution) stage() Result {
	if x.reg.h.SetValue == nil {
		return x.unsupported()
	}
	if err := x.reg.values.check(x.cmd.Value); err != nil {
		return x.refuse(ReasonInvalidValue, err.(*Error).Message)
	}
	base, err := x.live()
	if err != nil {
		return x.failed(err)
	}
	sv := &staged{value: x.cmd.Value, base: base, prop: Proposal{
		Revision:   x.r.revision.Add(1),
		Provenance: x.provenance(),
		StagedAt:   x.r.now(),
		Why:        x.cmd.Why,
	}}
	if x.r.persisting() {
		p, err := savedProposal(sv)
		if err != nil {
			return x.refuse(ReasonInvalidValue, fmt.Sprintf("%s cannot be staged: %v", x.reg.id, err))
		}
		// The proposal replaces the one this registry shows, against the
		// value it shows; the store refuses when either changed elsewhere.
		u := Update{Key: x.s.key, Stage: p, Expect: expectProposal(x.currentStage())}
		if x.reg.hosted != nil && !x.reg.secret {
			u.Expect.Value = p.Base
		}
		if res, ok := x.persistProposal(u); !ok {
			return res
		}
	}
	x.s.staged.Store(sv)
	if x.r.events.active() {
		e := x.eventParts()
		e.prop = sv.prop
		x.r.events.emit(Event{Type: EventStaged, Identity: x.reg.id.clone(), Command: &e.cmd, Context: &e.cc, Staged: &e.prop})
	}
	return x.succeed()
}

func (x *execution) currentStage() *staged {
	return x.s.staged.Load()
}

// checkRevision refuses when the command names a revision that is not the
// staged one.
func (x *execution) checkRevision(sv *staged) (Result, bool) {
	if x.cmd.Revision == 0 || (sv != nil && sv.prop.Revision == x.cmd.Revision) {
		return Result{}, true
	}
	msg := fmt.Sprintf("revision %d of the proposal for %s is no longer current: nothing is staged now", x.cmd.Revision, x.reg.id)
	if sv != nil {
		msg = fmt.Sprintf("revision %d of the proposal for %s is no longer current (it is now %d); review the proposal again", x.cmd.Revision, x.reg.id, sv.prop.Revision)
	}
	return x.refuse(ReasonStaleRevision, msg), false
}

func (x *execution) apply() Result {
	h := &x.reg.h
	if h.SetValue == nil {
		return x.unsupported()
	}
	sv := x.currentStage()
	if r, ok := x.checkRevision(sv); !ok {
		return r
	}
	value := x.cmd.Value
	if value != nil {
		if err := x.reg.values.check(value); err != nil {
			return x.refuse(ReasonInvalidValue, err.(*Error).Message)
		}
	}
	if value == nil {
		if sv == nil {
			return x.refuse(ReasonNoStagedValue, fmt.Sprintf("nothing is staged for %s; stage a value first or give one with the command", x.reg.id))
		}
		value = sv.value
	}
	prev, err := x.live()
	if err != nil {
		return x.failed(err)
	}
	if x.cmd.Value == nil && h.GetValue != nil && !Equal(prev, sv.base) {
		return x.refuse(ReasonStagedValueStale, fmt.Sprintf("%s changed after the value was proposed; review the proposal against the current value, then stage it again or discard it", x.reg.id))
	}
	x.s.applying.Store(true)
	defer x.s.applying.Store(false)
	if err := call(func() error { return h.SetValue(x.ctx, value) }); err != nil {
		return x.failed(err)
	}
	e := undoEntry{action: Apply, previous: prev, applied: x.readBack(value), prov: x.provenance(), at: x.r.now()}
	var want Expect
	if x.r.persisting() {
		want = expectProposal(sv)
		if x.cmd.Value == nil {
			// The staged value goes in only over the value it was
			// staged against.
			expectValue(&want, x.reg, prev)
		}
	}
	if res, ok := x.saveChange(&e, want); !ok {
		return res
	}
	x.s.staged.Store(nil)
	x.s.mu.Lock()
	x.s.hist.push(e, x.r.depth)
	x.s.mu.Unlock()
	return x.succeed()
}

// readBack returns the value the control holds after a write, which may be
// a normalized form of what was written; it falls back to written.
func (x *execution) readBack(written any) any {
	if x.reg.h.GetValue == nil {
		return written
	}
	v, err := callGet(x.ctx, x.reg.h.GetValue)
	if err != nil {
		return written
	}
	return v
}

func (x *execution) clear() Result {
	h := &x.reg.h
	if h.Clear == nil && h.SetValue == nil {
		return x.unsupported()
	}
	prev, err := x.live()
	if err != nil {
		return x.failed(err)
	}
	var written any
	if h.Clear != nil {
		err = call(func() error { return h.Clear(x.ctx) })
	} else {
		written = ""
		err = call(func() error { return h.SetValue(x.ctx, "") })
	}
	if err != nil {
		return x.failed(err)
	}
	e := undoEntry{action: Clear, previous: prev, applied: x.readBack(written), prov: x.provenance(), at: x.r.now()}
	var want Expect
	if x.r.persisting() {
		want = expectProposal(x.currentStage())
	}
	if res, ok := x.saveChange(&e, want); !ok {
		return res
	}
	x.s.staged.Store(nil)
	x.s.mu.Lock()
	x.s.hist.push(e, x.r.depth)
	x.s.mu.Unlock()
	return x.succeed()
}

// saveChange writes through an apply or clear that wrote e to the control:
// the proposal closes and e joins the undo history, provided the saved
// state is what want expects. When that fails the control's previous
// value is written back.
func (x *execution) saveChange(e *undoEntry, want Expect) (Result, bool) {
	if !x.r.persisting() {
		return Result{}, true
	}
	u := Update{Key: x.s.key, Unstage: true, Expect: want}
	if x.r.depth > 0 {
		c, err := savedChange(e)
		if err != nil {
			if revert := x.restoreWrite(e.previous); revert != nil {
				revert()
			}
			return x.failed(err), false
		}
		u.Push, u.Depth = c, x.r.depth
	}
	return x.persist(u, x.restoreWrite(e.previous))
}

func (x *execution) undo() Result {
	h := &x.reg.h
	if h.SetValue == nil {
		return x.unsupported()
	}
	x.s.mu.Lock()
	e, ok := x.s.hist.top()
	x.s.mu.Unlock()
	if !ok {
		return x.refuse(ReasonNothingToUndo, fmt.Sprintf("%s has no change to undo", x.reg.id))
	}
	var want Expect
	if x.r.persisting() {
		// The entry popped is the newest saved, and the value it reverses
		// is still the saved one.
		want = Expect{Undo: true, UndoAt: e.at}
	}
	if h.GetValue != nil {
		live, err := callGet(x.ctx, h.GetValue)
		if err != nil {
			return x.failed(err)
		}
		if !Equal(live, e.applied) {
			return x.refuse(ReasonStagedValueStale, fmt.Sprintf("%s was edited after the change undo would reverse; undoing would overwrite that edit, so change the value directly instead", x.reg.id))
		}
		if x.r.persisting() {
			expectValue(&want, x.reg, live)
		}
	}
	if err := call(func() error { return h.SetValue(x.ctx, e.previous) }); err != nil {
		return x.failed(err)
	}
	if x.r.persisting() {
		if res, ok := x.persist(Update{Key: x.s.key, Pop: true, Expect: want}, x.restoreWrite(e.applied)); !ok {
			return res
		}
	}
	x.s.mu.Lock()
	x.s.hist.pop()
	x.s.mu.Unlock()
	return x.succeed()
}

func (x *execution) discard() Result {
	sv := x.currentStage()
	if r, ok := x.checkRevision(sv); !ok {
		return r
	}
	if sv == nil {
		return x.refuse(ReasonNoStagedValue, fmt.Sprintf("nothing is staged for %s, so there is nothing to discard", x.reg.id))
	}
	if x.r.persisting() {
		if res, ok := x.persistProposal(Update{Key: x.s.key, Unstage: true, Expect: expectProposal(sv)}); !ok {
			return res
		}
	}
	x.s.staged.CompareAndSwap(sv, nil)
	return x.succeed()
}

func (x *execution) unsupported() Result {
	return x.refuse(ReasonUnsupported, fmt.Sprintf("%s does not support %s; its capabilities are %v", x.reg.id, x.cmd.Action, x.reg.md.Capabilities))
}

func (x *execution) refuse(reason Reason, msg string) Result {
	if x.res.Snapshot.IsZero() {
		_ = x.r.fill(x.ctx, x.s, x.reg, false, &x.res.Snapshot)
	}
	x.res.OK = false
	x.res.Reason = reason
	x.res.Message = msg
	return x.finish()
}

// failed reports a handle or policy failure. A redacted control's error
// text could carry its value, so it is replaced.
func (x *execution) failed(err error) Result {
	msg := err.Error()
	if x.reg.redacted {
		msg = fmt.Sprintf("%s reported an error during %s; its details are hidden because the control's value is redacted", x.reg.id, x.cmd.Action)
	}
	return x.refuse(ReasonCommandFailed, msg)
}

func (x *execution) succeed() Result {
	_ = x.r.fill(x.ctx, x.s, x.reg, false, &x.res.Snapshot)
	x.res.OK = true
	return x.finish()
}

// finish emits the command event and returns the result.
func (x *execution) finish() Result {
	if x.r.events.active() {
		e := x.eventParts()
		e.res = x.res
		x.r.events.emit(Event{Type: EventCommand, Identity: x.reg.id.clone(), Command: &e.cmd, Context: &e.cc, Result: &e.res})
	}
	return x.res
}

// eventParts holds what an event points to, in one allocation.
type eventParts struct {
	cmd  Command
	cc   CommandContext
	res  Result
	prop Proposal
}

// eventParts returns the command, as events show it (without the value of
// a redacted control), and its context.
func (x *execution) eventParts() *eventParts {
	e := &eventParts{cmd: x.cmd, cc: x.cc}
	e.cmd.Identity = e.cmd.Identity.clone()
	if x.reg.redacted {
		e.cmd.Value = nil
	}
	return e
}

// orBackground replaces a nil context, which handles could not use.
func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// call runs a handle and turns a panic into an error.
func call(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the control panicked: %v", p)
		}
	}()
	return f()
}

func callGet(ctx context.Context, f func(context.Context) (any, error)) (v any, err error) {
	err = call(func() error { v, err = f(ctx); return err })
	return v, err
}

func callState(ctx context.Context, f func(context.Context) (State, error)) (st State, err error) {
	err = call(func() error { st, err = f(ctx); return err })
	return st, err
}
