package control

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
)

// memStore is a Persister in memory that can be told to fail.
type memStore struct {
	mu       sync.Mutex
	fail     error
	revision int64
	forms    []SavedForm
	controls map[Key]*SavedControl
	calls    int
}

func newMemStore() *memStore { return &memStore{controls: map[Key]*SavedControl{}} }

var errDown = errors.New("the database is down")

func (m *memStore) setFail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = err
}

func (m *memStore) begin() error {
	m.calls++
	return m.fail
}

func (m *memStore) formOf(k Key) int {
	for i, f := range m.forms {
		for _, c := range f.Controls {
			if c.Key == k {
				return i
			}
		}
	}
	return -1
}

func (m *memStore) SaveControl(_ context.Context, u Update) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(); err != nil {
		return err
	}
	if err := m.check(u); err != nil {
		return err
	}
	c := m.controls[u.Key]
	if c == nil {
		c = &SavedControl{Key: u.Key}
		m.controls[u.Key] = c
	}
	switch {
	case u.Stage != nil:
		p := *u.Stage
		c.Proposal = &p
		m.revision = max(m.revision, p.Revision)
	case u.Unstage:
		c.Proposal = nil
	}
	switch {
	case u.Pop && len(c.History) > 0:
		c.History = c.History[:len(c.History)-1]
	case u.Push != nil:
		c.History = append(c.History, *u.Push)
		if over := len(c.History) - u.Depth; over > 0 {
			c.History = slices.Delete(c.History, 0, over)
		}
	}
	if u.Value != nil {
		if i := m.formOf(u.Key); i >= 0 {
			for j := range m.forms[i].Controls {
				if m.forms[i].Controls[j].Key == u.Key {
					m.forms[i].Controls[j].Value = slices.Clone(u.Value)
				}
			}
		}
	}
	if c.Proposal == nil && len(c.History) == 0 {
		delete(m.controls, u.Key)
	}
	return nil
}

func (m *memStore) ForgetControl(_ context.Context, k Key) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(); err != nil {
		return err
	}
	delete(m.controls, k)
	return nil
}

func (m *memStore) SaveForm(_ context.Context, f SavedForm) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(); err != nil {
		return err
	}
	f.Controls = slices.Clone(f.Controls)
	i := slices.IndexFunc(m.forms, func(g SavedForm) bool { return g.FormID == f.FormID })
	if i < 0 {
		m.forms = append(m.forms, f)
		return nil
	}
	for _, c := range m.forms[i].Controls {
		if !slices.ContainsFunc(f.Controls, func(d SavedHosted) bool { return d.Key == c.Key }) {
			delete(m.controls, c.Key)
		}
	}
	m.forms[i] = f
	return nil
}

func (m *memStore) DeleteForm(_ context.Context, formID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(); err != nil {
		return err
	}
	i := slices.IndexFunc(m.forms, func(g SavedForm) bool { return g.FormID == formID })
	if i < 0 {
		return nil
	}
	for _, c := range m.forms[i].Controls {
		delete(m.controls, c.Key)
	}
	m.forms = slices.Delete(m.forms, i, i+1)
	return nil
}

func (m *memStore) LoadControls(context.Context) (Saved, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(); err != nil {
		return Saved{}, err
	}
	s := Saved{Revision: m.revision, Forms: slices.Clone(m.forms)}
	for _, c := range m.controls {
		s.Controls = append(s.Controls, SavedControl{Key: c.Key, Proposal: c.Proposal, History: slices.Clone(c.History)})
	}
	return s, nil
}

// dump returns the saved state as JSON, to compare before and after.
func (m *memStore) dump(t *testing.T) string {
	t.Helper()
	s, err := m.LoadControls(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(s.Controls, func(a, b SavedControl) int {
		if a.Key.FormID+a.Key.ControlID < b.Key.FormID+b.Key.ControlID {
			return -1
		}
		return 1
	})
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var (
	nameID  = Identity{FormID: "profile", ControlID: "name"}
	ageID   = Identity{FormID: "profile", ControlID: "age"}
	fieldID = Identity{FormID: "scr_1", ControlID: "city"}
)

func profileForm() HostedForm {
	return HostedForm{FormID: "profile", Owner: "svc", Controls: []HostedControl{
		{Identity: Identity{ControlID: "name"}, Metadata: text("Name"), Value: "Ada"},
		{Identity: Identity{ControlID: "age"}, Metadata: Metadata{Kind: KindNumber, Label: "Age"}, Value: 36},
	}}
}

// TestRestoreAfterRestart stages proposals, records undo and sets values
// on a registry backed by a store, then builds a new registry from the
// store and finds the same proposals, decidable, and the same undo.
func TestRestoreAfterRestart(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	clk := newClock()
	a := New(Config{Store: st, Now: clk.now})
	if err := a.Host(ctx, profileForm()); err != nil {
		t.Fatal(err)
	}
	city := newSpy("Paris")
	mustRegister(t, a, Registration{Identity: fieldID, Metadata: text("City"), Handles: city.handles()})

	wantReason(t, exec(t, a, Command{Action: Stage, Identity: nameID, Value: "Grace"}, person), "")
	wantReason(t, exec(t, a, Command{Action: Apply, Identity: nameID}, person), "")
	wantReason(t, exec(t, a, Command{Action: Stage, Identity: nameID, Value: "Ada L."}, agent), "")
	wantReason(t, exec(t, a, Command{Action: Stage, Identity: ageID, Value: 37}, agent), "")
	wantReason(t, exec(t, a, Command{Action: Stage, Identity: fieldID, Value: "Rome"}, agent), "")
	// A person's own edit makes the age proposal stale.
	if err := a.SetHostedValue(ctx, ageID, 40); err != nil {
		t.Fatal(err)
	}
	before := a.Proposals(ctx, "")
	changes := a.Changes(ctx, "")
	if len(before) != 3 || len(changes) != 1 {
		t.Fatalf("before the restart: %d proposals, %d changes; want 3 and 1", len(before), len(changes))
	}
	a.Close()
	// Closing first, the application unregisters its controls as it stops;
	// that erases nothing saved.
	a.Unregister(fieldID)

	b := New(Config{Store: st, Now: clk.now})
	forms, err := b.Restore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(forms) != 1 || forms[0].FormID != "profile" || forms[0].Owner != "svc" || len(forms[0].Controls) != 2 {
		t.Fatalf("restored forms = %+v", forms)
	}
	if got := forms[0].Controls[1].Value; !Equal(got, 40) {
		t.Errorf("restored age = %v, want the edited 40", got)
	}
	city2 := newSpy("Paris")
	mustRegister(t, b, Registration{Identity: fieldID, Metadata: text("City"), Handles: city2.handles()})

	after := b.Proposals(ctx, "")
	if len(after) != len(before) {
		t.Fatalf("after the restart: %d proposals, want %d", len(after), len(before))
	}
	for _, want := range before {
		i := slices.IndexFunc(after, func(s Snapshot) bool { return s.Identity.Equal(want.Identity) })
		if i < 0 {
			t.Fatalf("proposal for %s is gone", want.Identity)
		}
		got := after[i].State
		if *got.Staged != *want.State.Staged || !Equal(got.StagedValue, want.State.StagedValue) {
			t.Errorf("%s: proposal %+v (%v) after the restart, want %+v (%v)", want.Identity, *got.Staged, got.StagedValue, *want.State.Staged, want.State.StagedValue)
		}
	}
	if got := b.Changes(ctx, ""); len(got) != 1 || got[0].Provenance != changes[0].Provenance || !got[0].At.Equal(changes[0].At) || !Equal(got[0].Previous, "Ada") {
		t.Errorf("changes after the restart = %+v, want %+v", got, changes)
	}

	// Decidable: the stale proposal is refused, the others apply by the
	// revision the person reviewed; undo reverses the apply made before
	// the restart once nothing newer is on top.
	stale := slices.IndexFunc(after, func(s Snapshot) bool { return s.Identity.Equal(ageID) })
	wantReason(t, exec(t, b, Command{Action: Apply, Identity: ageID, Revision: after[stale].State.Staged.Revision}, person), ReasonStagedValueStale)
	name := slices.IndexFunc(after, func(s Snapshot) bool { return s.Identity.Equal(nameID) })
	wantReason(t, exec(t, b, Command{Action: Discard, Identity: nameID, Revision: after[name].State.Staged.Revision}, person), "")
	field := slices.IndexFunc(after, func(s Snapshot) bool { return s.Identity.Equal(fieldID) })
	wantReason(t, exec(t, b, Command{Action: Apply, Identity: fieldID, Revision: after[field].State.Staged.Revision}, person), "")
	if got := city2.get(); got != "Rome" {
		t.Errorf("city after apply = %v, want Rome", got)
	}
	wantReason(t, exec(t, b, Command{Action: Undo, Identity: nameID}, person), "")
	if snap, _ := b.Get(ctx, nameID); snap.State.Value != "Ada" {
		t.Errorf("name after undo = %v, want Ada", snap.State.Value)
	}

	// Revisions are never reused across the restart.
	var highest int64
	for _, s := range before {
		highest = max(highest, s.State.Staged.Revision)
	}
	res := exec(t, b, Command{Action: Stage, Identity: nameID, Value: "Lovelace"}, agent)
	wantReason(t, res, "")
	if rev := res.Snapshot.State.Staged.Revision; rev <= highest {
		t.Errorf("revision after the restart = %d, want more than %d", rev, highest)
	}

	// A third registry sees what the second one did.
	c := New(Config{Store: st})
	if _, err := c.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if snap, _ := c.Get(ctx, nameID); snap.State.Value != "Ada" || snap.State.Staged == nil || snap.State.StagedValue != "Lovelace" {
		t.Errorf("third registry: name = %+v", snap.State)
	}
	if got := c.Changes(ctx, ""); len(got) != 0 {
		t.Errorf("third registry: changes = %+v; the undo and the unregistered field left none", got)
	}
}

// TestWriteThroughFailure checks that a command whose change cannot be
// saved fails with store_unavailable and changes nothing: neither the
// control, nor the registry, nor what is saved.
func TestWriteThroughFailure(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		setup []Command // run before the store fails
		cmd   Command
	}{
		{"stage", nil, Command{Action: Stage, Identity: nameID, Value: "Grace"}},
		{"apply staged", []Command{{Action: Stage, Identity: nameID, Value: "Grace"}}, Command{Action: Apply, Identity: nameID}},
		{"apply value", nil, Command{Action: Apply, Identity: nameID, Value: "Grace"}},
		{"clear", nil, Command{Action: Clear, Identity: nameID}},
		{"undo", []Command{{Action: Apply, Identity: nameID, Value: "Grace"}}, Command{Action: Undo, Identity: nameID}},
		{"discard", []Command{{Action: Stage, Identity: nameID, Value: "Grace"}}, Command{Action: Discard, Identity: nameID}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := newMemStore()
			r := New(Config{Store: st})
			if err := r.Host(ctx, profileForm()); err != nil {
				t.Fatal(err)
			}
			for _, c := range tc.setup {
				wantReason(t, exec(t, r, c, person), "")
			}
			snapBefore, _ := r.Get(ctx, nameID)
			changesBefore := r.Changes(ctx, "")
			saved := st.dump(t)

			st.setFail(errDown)
			res := exec(t, r, tc.cmd, person)
			wantReason(t, res, ReasonStoreUnavailable)

			st.setFail(nil)
			snapAfter, _ := r.Get(ctx, nameID)
			if a, b := mustJSON(t, snapAfter), mustJSON(t, snapBefore); a != b {
				t.Errorf("the control changed:\n\t%s\nwas\n\t%s", a, b)
			}
			if a, b := mustJSON(t, r.Changes(ctx, "")), mustJSON(t, changesBefore); a != b {
				t.Errorf("the undo history changed: %s, was %s", a, b)
			}
			if got := st.dump(t); got != saved {
				t.Errorf("the store changed:\n\t%s\nwas\n\t%s", got, saved)
			}
		})
	}
}

// TestHostingFailure checks Host, Unhost and SetHostedValue against a
// failing store: refused with store_unavailable, nothing changed.
func TestHostingFailure(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		do   func(r *Registry) error
	}{
		{"host", func(r *Registry) error {
			f := profileForm()
			f.Controls = f.Controls[:1]
			return r.Host(ctx, f)
		}},
		{"unhost", func(r *Registry) error { _, err := r.Unhost(ctx, "profile"); return err }},
		{"set value", func(r *Registry) error { return r.SetHostedValue(ctx, nameID, "Grace") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := newMemStore()
			r := New(Config{Store: st})
			if err := r.Host(ctx, profileForm()); err != nil {
				t.Fatal(err)
			}
			listBefore := mustJSON(t, r.List(ctx, ""))
			saved := st.dump(t)
			st.setFail(errDown)
			err := tc.do(r)
			var ce *Error
			if !errors.As(err, &ce) || ce.Reason != ReasonStoreUnavailable || ce.Message == "" {
				t.Fatalf("err = %v, want store_unavailable with a message", err)
			}
			st.setFail(nil)
			if got := mustJSON(t, r.List(ctx, "")); got != listBefore {
				t.Errorf("the registry changed:\n\t%s\nwas\n\t%s", got, listBefore)
			}
			if got := st.dump(t); got != saved {
				t.Errorf("the store changed")
			}
		})
	}
}

// TestHostRedeclare checks that a new declaration keeps the proposals of
// the controls it keeps and drops those it leaves out, in memory and in
// the store.
func TestHostRedeclare(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	r := New(Config{Store: st})
	if err := r.Host(ctx, profileForm()); err != nil {
		t.Fatal(err)
	}
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: nameID, Value: "Grace"}, agent), "")
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: ageID, Value: 3}, agent), "")
	f := profileForm()
	f.Controls = f.Controls[:1]
	if err := r.Host(ctx, f); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Get(ctx, ageID); ok {
		t.Error("age is still registered")
	}
	r2 := New(Config{Store: st})
	if _, err := r2.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	props := r2.Proposals(ctx, "")
	if len(props) != 1 || !props[0].Identity.Equal(nameID) {
		t.Errorf("restored proposals = %v, want name's only", props)
	}
	if ok, err := r2.Unhost(ctx, "profile"); !ok || err != nil {
		t.Fatalf("Unhost = %v, %v", ok, err)
	}
	if got := st.dump(t); got != `{"Revision":2,"Forms":[],"Controls":null}` {
		t.Errorf("after Unhost the store holds %s", got)
	}
}

// TestRestoreBoundsHistory checks that a history restored into a registry
// with a smaller depth keeps the newest entries.
func TestRestoreBoundsHistory(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	r := New(Config{Store: st, HistoryDepth: 5})
	if err := r.Host(ctx, profileForm()); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		wantReason(t, exec(t, r, Command{Action: Apply, Identity: nameID, Value: v}, person), "")
	}
	if got := st.controls[nameID.Key()]; len(got.History) != 5 {
		t.Fatalf("the store holds %d entries, want 5", len(got.History))
	}
	r2 := New(Config{Store: st, HistoryDepth: 2})
	if _, err := r2.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if ch := r2.Changes(ctx, ""); len(ch) != 1 || ch[0].Depth != 2 || ch[0].Previous != "f" {
		t.Fatalf("changes = %+v, want depth 2 undoing to f", ch)
	}
	for _, want := range []string{"f", "e"} {
		wantReason(t, exec(t, r2, Command{Action: Undo, Identity: nameID}, person), "")
		if snap, _ := r2.Get(ctx, nameID); snap.State.Value != want {
			t.Fatalf("after undo: %v, want %s", snap.State.Value, want)
		}
	}
	wantReason(t, exec(t, r2, Command{Action: Undo, Identity: nameID}, person), ReasonNothingToUndo)
}

// TestClosedRegistry checks that a closed registry refuses changes and
// that without a store nothing changes at all.
func TestClosedRegistry(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	r := New(Config{Store: st})
	if err := r.Host(ctx, profileForm()); err != nil {
		t.Fatal(err)
	}
	r.Close()
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: nameID, Value: "x"}, agent), ReasonStoreUnavailable)
	wantReason(t, exec(t, r, Command{Action: Explain, Identity: nameID}, agent), "")

	plain := New(Config{})
	plain.Close()
	if forms, err := plain.Restore(ctx); forms != nil || err != nil {
		t.Errorf("Restore without a store = %v, %v", forms, err)
	}
	if err := plain.Host(ctx, profileForm()); err != nil {
		t.Fatal(err)
	}
	wantReason(t, exec(t, plain, Command{Action: Stage, Identity: nameID, Value: "x"}, agent), "")
	if err := plain.SetHostedValue(ctx, nameID, "y"); err != nil {
		t.Fatal(err)
	}
	if snap, _ := plain.Get(ctx, nameID); snap.State.Value != "y" || !snap.State.Staged.Stale {
		t.Errorf("after a direct edit: %+v, want y with a stale proposal", snap.State)
	}
}

// TestHostRejectsBadForms checks Host's own validation.
func TestHostRejectsBadForms(t *testing.T) {
	tests := []struct {
		name string
		f    HostedForm
		want Reason
	}{
		{"no form id", HostedForm{Controls: profileForm().Controls}, ReasonInvalidRequest},
		{"other form", HostedForm{FormID: "profile", Controls: []HostedControl{{Identity: Identity{FormID: "x", ControlID: "a"}, Metadata: text("A")}}}, ReasonInvalidRequest},
		{"twice", HostedForm{FormID: "profile", Controls: []HostedControl{{Identity: Identity{ControlID: "a"}, Metadata: text("A")}, {Identity: Identity{ControlID: "a"}, Metadata: text("A")}}}, ReasonInvalidRequest},
		{"bad metadata", HostedForm{FormID: "profile", Controls: []HostedControl{{Identity: Identity{ControlID: "a"}, Metadata: Metadata{Kind: "hologram"}}}}, ReasonInvalidRequest},
		{"unencodable value", HostedForm{FormID: "profile", Controls: []HostedControl{{Identity: Identity{ControlID: "a"}, Metadata: text("A"), Value: make(chan int)}}}, ReasonInvalidValue},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := newMemStore()
			r := New(Config{Store: st})
			err := r.Host(context.Background(), tc.f)
			var ce *Error
			if !errors.As(err, &ce) || ce.Reason != tc.want {
				t.Fatalf("Host = %v, want %s", err, tc.want)
			}
			if len(r.List(context.Background(), "")) != 0 || st.calls != 0 {
				t.Error("a refused form was registered or saved")
			}
		})
	}
}

// TestRestoreDamaged checks that a damaged store is reported and leaves the
// registry unchanged.
func TestRestoreDamaged(t *testing.T) {
	st := newMemStore()
	st.controls[nameID.Key()] = &SavedControl{Key: nameID.Key(), Proposal: &SavedProposal{Revision: 1, Value: json.RawMessage(`{`)}}
	r := New(Config{Store: st})
	_, err := r.Restore(context.Background())
	var ce *Error
	if !errors.As(err, &ce) || ce.Reason != ReasonInvalidRequest {
		t.Fatalf("Restore = %v, want invalid_request", err)
	}
	st.setFail(errDown)
	if _, err := r.Restore(context.Background()); !errors.As(err, &ce) || ce.Reason != ReasonStoreUnavailable {
		t.Fatalf("Restore = %v, want store_unavailable", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Two registries on one store, as two nodes: what one changes, the other
// sees after Refresh, and a person applies there what an agent staged on
// the first.
func TestRefreshSharesAStore(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	clk := newClock()
	a := New(Config{Store: st, Now: clk.now})
	if err := a.Host(ctx, profileForm()); err != nil {
		t.Fatal(err)
	}
	b := New(Config{Store: st, Now: clk.now})
	if _, err := b.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	wantReason(t, exec(t, a, Command{Action: Stage, Identity: nameID, Value: "Grace"}, agent), "")
	if got := b.Proposals(ctx, ""); len(got) != 0 {
		t.Fatalf("b sees %d proposals before Refresh", len(got))
	}
	if err := b.Refresh(ctx, nameID.Key()); err != nil {
		t.Fatal(err)
	}
	props := b.Proposals(ctx, "")
	if len(props) != 1 || !Equal(props[0].State.StagedValue, "Grace") {
		t.Fatalf("b's proposals after Refresh = %+v", props)
	}
	wantReason(t, exec(t, b, Command{Action: Apply, Identity: nameID, Revision: props[0].State.Staged.Revision}, person), "")

	if err := a.Refresh(ctx, nameID.Key()); err != nil {
		t.Fatal(err)
	}
	if got := a.Proposals(ctx, ""); len(got) != 0 {
		t.Fatalf("a still shows %d proposals after b applied", len(got))
	}
	snap, ok := a.Get(ctx, nameID)
	if !ok || !Equal(snap.State.Value, "Grace") {
		t.Fatalf("a's value after b applied = %+v", snap.State)
	}
	// The undo history came along: a person on a may undo b's apply.
	wantReason(t, exec(t, a, Command{Action: Undo, Identity: nameID}, person), "")
	// A new stage on a gets a revision above every one b handed out.
	wantReason(t, exec(t, a, Command{Action: Stage, Identity: nameID, Value: "Ada"}, agent), "")
	if got := a.Proposals(ctx, ""); len(got) != 1 || got[0].State.Staged.Revision <= props[0].State.Staged.Revision {
		t.Fatalf("revision after refresh = %+v, want above %d", got, props[0].State.Staged.Revision)
	}
	// Refreshing a control nobody registered here does nothing.
	if err := a.Refresh(ctx, Key{FormID: "none", ControlID: "x"}); err != nil {
		t.Fatal(err)
	}
}

// cmdStore is a memStore that is also a CommandSaver, recording the
// commands it is told about.
type cmdStore struct {
	*memStore
	cmds  []SavedCommand
	fails error
}

func (c *cmdStore) SaveCommand(ctx context.Context, u Update, sc SavedCommand) error {
	if c.fails != nil {
		return c.fails
	}
	if err := c.SaveControl(ctx, u); err != nil {
		return err
	}
	c.cmds = append(c.cmds, sc)
	return nil
}

// TestCommandSaver checks that a CommandSaver learns the command of every
// change Execute saves, without the value of a redacted control, and only
// for changes made by commands; and that its failure is store_unavailable
// with nothing changed.
func TestCommandSaver(t *testing.T) {
	ctx := context.Background()
	unreadable := false
	pinID := Identity{FormID: "profile", ControlID: "pin"}
	tests := []struct {
		name     string
		setup    []Command
		cmd      Command
		cc       CommandContext
		want     Reason
		saved    bool // SaveCommand is called
		redacted bool
	}{
		{"stage", nil, Command{Action: Stage, Identity: nameID, Value: "Grace"}, agent, "", true, false},
		{"apply staged", []Command{{Action: Stage, Identity: nameID, Value: "Grace"}}, Command{Action: Apply, Identity: nameID}, person, "", true, false},
		{"apply to a write-only control", nil, Command{Action: Apply, Identity: pinID, Value: "1234"}, person, "", true, true},
		{"clear", nil, Command{Action: Clear, Identity: nameID}, person, "", true, false},
		{"undo", []Command{{Action: Apply, Identity: nameID, Value: "Grace"}}, Command{Action: Undo, Identity: nameID}, person, "", true, false},
		{"discard", []Command{{Action: Stage, Identity: nameID, Value: "Grace"}}, Command{Action: Discard, Identity: nameID}, person, "", true, false},
		{"refused by the policy", nil, Command{Action: Apply, Identity: nameID, Value: "Grace"}, agent, ReasonHumanConfirmationRequired, false, false},
		{"nothing to discard", nil, Command{Action: Discard, Identity: nameID}, person, ReasonNoStagedValue, false, false},
		{"not a mutation", nil, Command{Action: Explain, Identity: nameID}, agent, "", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := &cmdStore{memStore: newMemStore()}
			r := New(Config{Store: st})
			form := profileForm()
			form.Controls = append(form.Controls, HostedControl{Identity: Identity{ControlID: "pin"},
				Metadata: Metadata{Kind: KindText, Label: "PIN", Readable: &unreadable}, Value: ""})
			if err := r.Host(ctx, form); err != nil {
				t.Fatal(err)
			}
			for _, c := range tc.setup {
				wantReason(t, exec(t, r, c, person), "")
			}
			st.cmds = nil
			wantReason(t, exec(t, r, tc.cmd, tc.cc), tc.want)
			if !tc.saved {
				if len(st.cmds) != 0 {
					t.Fatalf("SaveCommand got %+v for a command that changed nothing", st.cmds)
				}
				return
			}
			if len(st.cmds) != 1 {
				t.Fatalf("SaveCommand called %d times, want once", len(st.cmds))
			}
			got := st.cmds[0]
			if got.Command.Action != tc.cmd.Action || !got.Command.Identity.Equal(tc.cmd.Identity) || got.Context != tc.cc.normalize() {
				t.Errorf("SaveCommand got %+v, want the command %+v from %+v", got, tc.cmd, tc.cc)
			}
			if got.ValueRedacted != tc.redacted {
				t.Errorf("ValueRedacted = %v, want %v", got.ValueRedacted, tc.redacted)
			}
			wantValue := tc.cmd.Value
			if tc.redacted {
				wantValue = nil
			}
			if got.Command.Value != wantValue {
				t.Errorf("the saved command's value = %v, want %v", got.Command.Value, wantValue)
			}
		})
	}

	t.Run("edit", func(t *testing.T) {
		st := &cmdStore{memStore: newMemStore()}
		r := New(Config{Store: st})
		if err := r.Host(ctx, profileForm()); err != nil {
			t.Fatal(err)
		}
		if err := r.SetHostedValue(ctx, ageID, 40); err != nil {
			t.Fatal(err)
		}
		if len(st.cmds) != 0 {
			t.Errorf("an edit that is not a command reached SaveCommand: %+v", st.cmds)
		}
	})

	t.Run("failure", func(t *testing.T) {
		st := &cmdStore{memStore: newMemStore()}
		r := New(Config{Store: st})
		if err := r.Host(ctx, profileForm()); err != nil {
			t.Fatal(err)
		}
		saved := st.dump(t)
		st.fails = errDown
		wantReason(t, exec(t, r, Command{Action: Stage, Identity: nameID, Value: "Grace"}, agent), ReasonStoreUnavailable)
		if snap, _ := r.Get(ctx, nameID); snap.State.Staged != nil {
			t.Errorf("a stage whose save failed left a proposal: %+v", snap.State.Staged)
		}
		if got := st.dump(t); got != saved {
			t.Errorf("the store changed:\n\t%s\nwas\n\t%s", got, saved)
		}
	})
}

// While an apply is under way the live value may already be the proposed
// one; a snapshot taken then shows the proposal pending, never stale.
func TestProposalNotStaleWhileApplying(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	live := any("Paris")
	written := make(chan struct{})
	release := make(chan struct{})
	r := New(Config{})
	mustRegister(t, r, Registration{Identity: fieldID, Metadata: text("City"), Handles: Handles{
		GetValue: func(context.Context) (any, error) {
			mu.Lock()
			defer mu.Unlock()
			return live, nil
		},
		SetValue: func(_ context.Context, v any) error {
			mu.Lock()
			live = v
			mu.Unlock()
			close(written)
			<-release
			return nil
		},
	}})
	wantReason(t, exec(t, r, Command{Action: Stage, Identity: fieldID, Value: "Rome"}, agent), "")
	done := make(chan Result, 1)
	go func() { done <- r.Execute(ctx, Command{Action: Apply, Identity: fieldID}, person) }()
	<-written
	snap, ok := r.Get(ctx, fieldID)
	close(release)
	if !ok || snap.State.Staged == nil || snap.State.Staged.Stale {
		t.Errorf("during the apply the proposal reads %+v, want pending and not stale", snap.State.Staged)
	}
	if res := <-done; !res.OK {
		t.Fatalf("apply: %+v", res)
	}
	if snap, _ := r.Get(ctx, fieldID); snap.State.Staged != nil {
		t.Fatalf("after the apply the proposal is still open: %+v", snap.State.Staged)
	}
}

// valueLog is a Persister that records, for each update, whether it
// carried a hosted value.
type valueLog struct {
	*memStore
	withValue []bool
}

func (v *valueLog) SaveControl(ctx context.Context, u Update) error {
	v.withValue = append(v.withValue, u.Value != nil)
	return v.memStore.SaveControl(ctx, u)
}

// TestOnlyValueChangesWriteTheValue checks that the commands that change a
// hosted control's value write it through, and those that change only its
// proposal (stage, discard) leave the saved value alone.
func TestOnlyValueChangesWriteTheValue(t *testing.T) {
	ctx := context.Background()
	st := &valueLog{memStore: newMemStore()}
	r := New(Config{Store: st})
	if err := r.Host(ctx, profileForm()); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		cmd       Command
		cc        CommandContext
		withValue bool
	}{
		{Command{Action: Stage, Identity: nameID, Value: "Grace"}, agent, false},
		{Command{Action: Discard, Identity: nameID}, person, false},
		{Command{Action: Stage, Identity: nameID, Value: "Grace"}, agent, false},
		{Command{Action: Apply, Identity: nameID}, person, true},
		{Command{Action: Undo, Identity: nameID}, person, true},
		{Command{Action: Clear, Identity: nameID}, person, true},
	}
	for _, s := range steps {
		st.withValue = nil
		wantReason(t, exec(t, r, s.cmd, s.cc), "")
		if len(st.withValue) != 1 || st.withValue[0] != s.withValue {
			t.Errorf("%s wrote updates carrying a value %v; want one, carrying a value: %v", s.cmd.Action, st.withValue, s.withValue)
		}
	}
}
