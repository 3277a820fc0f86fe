package controls

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/sqlite"
	"github.com/assent-run/assent/tool"
)

// heldControls is a store of the control registry whose form writes
// (SaveForm and DeleteForm) can be held until a test lets them go, or made
// to fail.
type heldControls struct {
	store.Controls

	mu sync.Mutex
	// held, when set, holds the next form write: it is closed as the
	// write starts, which then waits for release to be closed.
	held, release chan struct{}
	fail          error
}

// holdNext holds the next form write. It returns a channel closed once
// that write has started and the function that lets it go on.
func (h *heldControls) holdNext() (started <-chan struct{}, letGo func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held, h.release = make(chan struct{}), make(chan struct{})
	release := h.release
	var once sync.Once
	return h.held, func() { once.Do(func() { close(release) }) }
}

// failWith makes every form write fail with err (nil: succeed again).
func (h *heldControls) failWith(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fail = err
}

// gate runs before a form write: it fails it, holds it, or lets it pass.
func (h *heldControls) gate() error {
	h.mu.Lock()
	held, release, fail := h.held, h.release, h.fail
	h.held, h.release = nil, nil
	h.mu.Unlock()
	if fail != nil {
		return fail
	}
	if held != nil {
		close(held)
		<-release
	}
	return nil
}

func (h *heldControls) SaveForm(ctx context.Context, f control.SavedForm) error {
	if err := h.gate(); err != nil {
		return err
	}
	return h.Controls.SaveForm(ctx, f)
}

func (h *heldControls) DeleteForm(ctx context.Context, formID string) error {
	if err := h.gate(); err != nil {
		return err
	}
	return h.Controls.DeleteForm(ctx, formID)
}

// newFormsPart builds a controls part on a fresh SQLite store whose
// control registry store is wrapped in a heldControls.
func newFormsPart(t *testing.T) (*Part, *heldControls) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	h, err := host.NewHost(t.Context(), host.Config{DataDir: t.TempDir(), Store: db})
	if err != nil {
		t.Fatal(err)
	}
	held := &heldControls{Controls: h.Store.ControlRegistry}
	h.Store.ControlRegistry = held
	p, err := New(ctx, hostDeps(h))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Close()
		h.Close()
	})
	return p, held
}

// textControls declares one text control for each id.
func textControls(ids ...string) []HostedControl {
	out := make([]HostedControl, len(ids))
	for i, id := range ids {
		out[i] = HostedControl{ControlID: id, Metadata: control.Metadata{Kind: control.KindText, Label: id}, Value: "v"}
	}
	return out
}

// formSummary describes a hosted form as "owner: control ids", or
// "absent".
func formSummary(ok bool, owner string, ids []string) string {
	if !ok {
		return "absent"
	}
	slices.Sort(ids)
	return owner + ": " + strings.Join(ids, ",")
}

// formStates describes formID as the part records it, as its registry
// hosts it and as the store keeps it.
func formStates(t *testing.T, p *Part, formID string) (part, registry, saved string) {
	t.Helper()
	p.formsMu.Lock()
	d, ok := p.forms[formID]
	part = "absent"
	if ok {
		part = fmt.Sprintf("%s: hosted=%v", d.owner, d.hosted)
	}
	p.formsMu.Unlock()

	registry = "absent"
	for _, f := range p.controls.HostedForms() {
		if f.FormID == formID {
			var ids []string
			for _, c := range f.Controls {
				ids = append(ids, c.Identity.ControlID)
			}
			registry = formSummary(true, f.Owner, ids)
		}
	}

	all, err := p.Store.ControlRegistry.LoadControls(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	saved = "absent"
	for _, f := range all.Forms {
		if f.FormID == formID {
			var ids []string
			for _, c := range f.Controls {
				ids = append(ids, c.Key.ControlID)
			}
			saved = formSummary(true, f.Owner, ids)
		}
	}
	return part, registry, saved
}

// wantForm fails unless the part, its registry and the store all hold
// formID as want describes it ("owner: control ids" or "absent").
func wantForm(t *testing.T, p *Part, formID, want string) {
	t.Helper()
	part, registry, saved := formStates(t, p, formID)
	wantPart := "absent"
	if owner, _, ok := strings.Cut(want, ": "); ok {
		wantPart = owner + ": hosted=true"
	}
	if part != wantPart || registry != want || saved != want {
		t.Fatalf("form %s: part %q, registry %q, store %q; want %q held alike", formID, part, registry, saved, want)
	}
}

// codeOf returns the code of a tool error, "" for nil.
func codeOf(err error) string {
	if err == nil {
		return ""
	}
	var te *tool.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return "not a tool error: " + err.Error()
}

// TestFormDeclarationsRace runs two declarations or removals of one form
// at once and checks that they end as if run one after the other: the
// outcomes are those of one of the two orders, and the part, its registry
// and the store hold the same form.
func TestFormDeclarationsRace(t *testing.T) {
	type op struct {
		remove bool
		owner  string
		ids    []string
	}
	declare := func(owner string, ids ...string) op { return op{owner: owner, ids: ids} }
	remove := func(owner string) op { return op{remove: true, owner: owner} }
	// outcome is one order's error codes ("" for success) and the form it
	// leaves.
	type outcome struct {
		codes [2]string
		form  string
	}
	tests := []struct {
		name   string
		before []op
		ops    [2]op
		// want lists the outcomes of running ops[0] first, then ops[1]
		// first.
		want []outcome
	}{
		{
			name: "two owners declare",
			ops:  [2]op{declare("p_a", "x"), declare("p_b", "y")},
			want: []outcome{
				{[2]string{"", "forbidden"}, "p_a: x"},
				{[2]string{"forbidden", ""}, "p_b: y"},
			},
		},
		{
			name:   "two owners redeclare",
			before: []op{declare("p_a", "x")},
			ops:    [2]op{declare("p_a", "y"), declare("p_b", "z")},
			want: []outcome{
				{[2]string{"", "forbidden"}, "p_a: y"},
				{[2]string{"", "forbidden"}, "p_a: y"},
			},
		},
		{
			name:   "redeclare and remove",
			before: []op{declare("p_a", "x")},
			ops:    [2]op{declare("p_a", "x", "y"), remove("p_a")},
			want: []outcome{
				{[2]string{"", ""}, "absent"},
				{[2]string{"", ""}, "p_a: x,y"},
			},
		},
		{
			name: "declare and remove a new form",
			ops:  [2]op{declare("p_a", "x"), remove("p_a")},
			want: []outcome{
				{[2]string{"", ""}, "absent"},
				{[2]string{"", "not_found"}, "p_a: x"},
			},
		},
		{
			name:   "remove and another owner's declaration",
			before: []op{declare("p_a", "x")},
			ops:    [2]op{remove("p_a"), declare("p_b", "y")},
			want: []outcome{
				{[2]string{"", ""}, "p_b: y"},
				{[2]string{"", "forbidden"}, "absent"},
			},
		},
	}
	ctx := context.Background()
	run := func(p *Part, formID string, o op) error {
		if o.remove {
			return p.removeForm(ctx, o.owner, formID)
		}
		return p.declareForm(ctx, o.owner, formID, false, textControls(o.ids...))
	}
	const rounds = 10
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := newFormsPart(t)
			for round := range rounds {
				formID := fmt.Sprint("form", round)
				for _, o := range tc.before {
					if err := run(p, formID, o); err != nil {
						t.Fatal(err)
					}
				}
				var errs [2]error
				var wg sync.WaitGroup
				start := make(chan struct{})
				for i, o := range tc.ops {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						errs[i] = run(p, formID, o)
					}()
				}
				close(start)
				wg.Wait()
				_, form, _ := formStates(t, p, formID)
				got := outcome{codes: [2]string{codeOf(errs[0]), codeOf(errs[1])}, form: form}
				if !slices.Contains(tc.want, got) {
					t.Fatalf("round %d: errors %v, %v leaving %q; want the outcome of one order: %+v", round, errs[0], errs[1], form, tc.want)
				}
				wantForm(t, p, formID, form)
			}
		})
	}
}

// TestFormWriteFailureChangesNothing: a declaration or removal the store
// refuses leaves the form as it was, in the part and in its registry.
func TestFormWriteFailureChangesNothing(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		run  func(p *Part) error
	}{
		{"declare a new form", func(p *Part) error { return p.declareForm(ctx, "p_a", "new", false, textControls("x")) }},
		{"redeclare", func(p *Part) error { return p.declareForm(ctx, "p_a", "kept", false, textControls("y")) }},
		{"remove", func(p *Part) error { return p.removeForm(ctx, "p_a", "kept") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, held := newFormsPart(t)
			if err := p.declareForm(ctx, "p_a", "kept", false, textControls("x")); err != nil {
				t.Fatal(err)
			}
			held.failWith(errors.New("the database is down"))
			if err := tc.run(p); codeOf(err) != "store_unavailable" {
				t.Fatalf("error = %v, want store_unavailable", err)
			}
			held.failWith(nil)
			wantForm(t, p, "kept", "p_a: x")
			wantForm(t, p, "new", "absent")
			// Nothing is left locked: the form can be changed at once.
			if err := p.declareForm(ctx, "p_a", "kept", false, textControls("z")); err != nil {
				t.Fatal(err)
			}
			wantForm(t, p, "kept", "p_a: z")
		})
	}
}

// TestFormWriteDoesNotStallCommands: while the store write of one form's
// declaration or removal is held, commands on another form and on the
// same form run to the end, and a second declaration of that form waits
// for the first and is then refused as it would be had it come later.
func TestFormWriteDoesNotStallCommands(t *testing.T) {
	ctx := context.Background()
	agent := store.Principal{ID: "p_agent", Kind: store.KindAgent}
	// deadline is only a guard against a hang: the commands need no time
	// beyond their own.
	const deadline = 30 * time.Second
	tests := []struct {
		name string
		// write is the held operation on the form "slow", declared by
		// p_a beforehand.
		write func(p *Part) error
		// after is what the part, its registry and the store hold of
		// "slow" once write is done.
		after string
	}{
		{"declare", func(p *Part) error { return p.declareForm(ctx, "p_a", "slow", false, textControls("x", "y")) }, "p_a: x,y"},
		{"remove", func(p *Part) error { return p.removeForm(ctx, "p_a", "slow") }, "absent"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, held := newFormsPart(t)
			for _, f := range []string{"other", "slow"} {
				if err := p.declareForm(ctx, "p_a", f, false, textControls("x")); err != nil {
					t.Fatal(err)
				}
			}
			started, letGo := held.holdNext()
			defer letGo()
			writeDone := make(chan error, 1)
			go func() { writeDone <- tc.write(p) }()
			select {
			case <-started:
			case <-time.After(deadline):
				t.Fatal("the form write never reached the store")
			}

			// A second owner's declaration of the held form waits for it.
			rivalDone := make(chan error, 1)
			go func() { rivalDone <- p.declareForm(ctx, "p_b", "slow", false, textControls("z")) }()

			commands := make(chan error, 1)
			go func() {
				for _, cmd := range []control.Command{
					{Action: control.Stage, Identity: control.Identity{FormID: "other", ControlID: "x"}, Value: "proposed"},
					{Action: control.Explain, Identity: control.Identity{FormID: "slow", ControlID: "x"}},
				} {
					res := p.Exec(ctx, agent, cmd, control.CommandContext{Source: control.SourceAgent})
					if !res.OK {
						commands <- fmt.Errorf("%s %s: %s (%s)", cmd.Action, cmd.Identity, res.Reason, res.Message)
						return
					}
				}
				if !p.FormVisible(ctx, agent, "slow") || len(p.List(ctx, agent, "other")) != 1 {
					commands <- errors.New("the forms are not listed as declared")
					return
				}
				commands <- nil
			}()
			select {
			case err := <-commands:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(deadline):
				letGo()
				<-writeDone
				<-rivalDone
				t.Fatal("commands waited for another form's store write")
			}
			select {
			case err := <-writeDone:
				t.Fatalf("the held write finished before it was let go: %v", err)
			case err := <-rivalDone:
				t.Fatalf("a second declaration finished while the first was held: %v", err)
			default:
			}

			letGo()
			if err := <-writeDone; err != nil {
				t.Fatal(err)
			}
			wantRival := "forbidden"
			if tc.after == "absent" {
				wantRival = "" // the form was free once removed
			}
			if err := <-rivalDone; codeOf(err) != wantRival {
				t.Fatalf("second owner's declaration = %v, want code %q", err, wantRival)
			}
			if wantRival == "" {
				wantForm(t, p, "slow", "p_b: z")
			} else {
				wantForm(t, p, "slow", tc.after)
			}
			snap, _ := p.controls.Get(ctx, control.Identity{FormID: "other", ControlID: "x"})
			if !control.Equal(snap.State.StagedValue, "proposed") {
				t.Errorf("other/x proposal = %v, want the staged value", snap.State.StagedValue)
			}
		})
	}
}

// TestScreenCannotTakeAFormBeingDeclared: while a new form's declaration
// is being saved, a screen registering its fields under the same form id
// is refused, as it is once the form is declared.
func TestScreenCannotTakeAFormBeingDeclared(t *testing.T) {
	ctx := context.Background()
	p, held := newFormsPart(t)
	started, letGo := held.holdNext()
	defer letGo()
	declared := make(chan error, 1)
	go func() { declared <- p.declareForm(ctx, "p_a", "fresh", false, textControls("x")) }()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the declaration never reached the store")
	}
	field := control.NewValue("typed")
	regs := []control.Registration{{
		Identity: control.Identity{FormID: "fresh", ControlID: "name"},
		Metadata: control.Metadata{Kind: control.KindText},
		Handles:  field.Handles(),
	}}
	remove, err := p.RegisterPrivateForm("p_screen_owner", "fresh", regs)
	if codeOf(err) != "forbidden" {
		if remove != nil {
			remove()
		}
		t.Fatalf("screen registration during the declaration = %v, want forbidden", err)
	}
	letGo()
	if err := <-declared; err != nil {
		t.Fatal(err)
	}
	wantForm(t, p, "fresh", "p_a: x")
	if _, err := p.RegisterPrivateForm("p_screen_owner", "fresh", regs); codeOf(err) != "forbidden" {
		t.Fatalf("screen registration after the declaration = %v, want forbidden", err)
	}
}
