package control

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
)

// waitLimit bounds every wait of these tests; it is generous, so only an
// operation that waits for something that never comes reaches it.
const waitLimit = 10 * time.Second

// gateStore is a memStore whose SaveForm of the form id gated, and whose
// LoadControls when gateLoad is set, stop at a gate: each announces itself
// on entered and waits for a value on release before it goes on. It logs
// the calls it completes, in order.
type gateStore struct {
	*memStore
	gated    string
	gateLoad bool
	entered  chan string
	release  chan struct{}

	logMu sync.Mutex
	log   []string
}

func newGateStore(gated string) *gateStore {
	return &gateStore{memStore: newMemStore(), gated: gated, entered: make(chan string), release: make(chan struct{})}
}

func (g *gateStore) record(s string) {
	g.logMu.Lock()
	defer g.logMu.Unlock()
	g.log = append(g.log, s)
}

// calls returns the calls completed so far.
func (g *gateStore) calls() []string {
	g.logMu.Lock()
	defer g.logMu.Unlock()
	return slices.Clone(g.log)
}

func (g *gateStore) gate(name string) {
	g.entered <- name
	<-g.release
}

func (g *gateStore) SaveForm(ctx context.Context, f SavedForm) error {
	if f.FormID == g.gated {
		g.gate("save " + f.FormID)
	}
	err := g.memStore.SaveForm(ctx, f)
	g.record("save " + f.FormID)
	return err
}

func (g *gateStore) LoadControls(ctx context.Context) (Saved, error) {
	if g.gateLoad {
		g.gate("load")
	}
	s, err := g.memStore.LoadControls(ctx)
	g.record("load")
	return s, err
}

// receive returns what ch delivers, failing the test when nothing comes
// within waitLimit.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("%s did not happen within %v", what, waitLimit)
		panic("unreachable")
	}
}

// waiters returns how many hold or wait for the lock of formID.
func (r *Registry) waiters(formID string) int {
	return r.formLocks.Waiting(formID)
}

// oneField is a hosted form with a single text control.
func oneField(formID, owner string) HostedForm {
	return HostedForm{FormID: formID, Owner: owner, Controls: []HostedControl{
		{Identity: Identity{ControlID: "name"}, Metadata: text("Name"), Value: "Ada"},
	}}
}

// hostAsync runs Host in a goroutine and returns where its error arrives.
func hostAsync(r *Registry, f HostedForm) <-chan error {
	done := make(chan error, 1)
	go func() { done <- r.Host(context.Background(), f) }()
	return done
}

func TestOtherFormProceedsWhileSaveBlocks(t *testing.T) {
	tests := []struct {
		name string
		op   func(r *Registry) error
	}{
		{"host", func(r *Registry) error {
			return r.Host(context.Background(), oneField("b", "second"))
		}},
		{"unhost", func(r *Registry) error {
			ok, err := r.Unhost(context.Background(), "b")
			if err == nil && !ok {
				err = fmt.Errorf("Unhost reported form b was not hosted")
			}
			return err
		}},
		{"refresh", func(r *Registry) error {
			_, ok, err := r.RefreshForm(context.Background(), "b")
			if err == nil && !ok {
				err = fmt.Errorf("RefreshForm did not find form b")
			}
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newGateStore("a")
			r := New(Config{Store: st})
			if err := r.Host(context.Background(), oneField("b", "first")); err != nil {
				t.Fatal(err)
			}
			hostA := hostAsync(r, oneField("a", "first"))
			receive(t, st.entered, "the store write of form a")

			done := make(chan error, 1)
			go func() { done <- tt.op(r) }()
			if err := receive(t, done, tt.name+" of form b while form a is being saved"); err != nil {
				t.Fatalf("%s of form b: %v", tt.name, err)
			}

			st.release <- struct{}{}
			if err := receive(t, hostA, "Host of form a"); err != nil {
				t.Fatalf("Host of form a: %v", err)
			}
		})
	}
}

func TestSameFormWaitsForSave(t *testing.T) {
	st := newGateStore("a")
	r := New(Config{Store: st})
	first := hostAsync(r, oneField("a", "first"))
	receive(t, st.entered, "the store write of the first declaration")

	second := hostAsync(r, oneField("a", "second"))
	testwait.Eventually(t, waitLimit, func() bool { return r.waiters("a") == 2 }, "the second declaration waiting for the first")
	select {
	case err := <-second:
		t.Fatalf("the second declaration finished (err %v) while the first was being saved", err)
	case name := <-st.entered:
		t.Fatalf("the store got %q while the first declaration was being saved", name)
	default:
	}

	st.release <- struct{}{}
	if err := receive(t, first, "the first declaration"); err != nil {
		t.Fatal(err)
	}
	receive(t, st.entered, "the store write of the second declaration")
	st.release <- struct{}{}
	if err := receive(t, second, "the second declaration"); err != nil {
		t.Fatal(err)
	}

	if got, want := st.calls(), []string{"save a", "save a"}; !slices.Equal(got, want) {
		t.Errorf("store calls = %q, want %q", got, want)
	}
	forms := r.HostedForms()
	if len(forms) != 1 || forms[0].Owner != "second" {
		t.Errorf("hosted forms = %+v, want form a as the second declaration", forms)
	}
	if n := r.waiters("a"); n != 0 {
		t.Errorf("%d still hold or wait for the lock of form a", n)
	}
}

func TestRestoreWaitsForHost(t *testing.T) {
	st := newGateStore("a")
	r := New(Config{Store: st})
	host := hostAsync(r, oneField("a", "first"))
	receive(t, st.entered, "the store write of form a")

	type restored struct {
		forms []HostedForm
		err   error
	}
	done := make(chan restored, 1)
	go func() {
		forms, err := r.Restore(context.Background())
		done <- restored{forms, err}
	}()
	// Restore has asked for the lock once readers are refused.
	testwait.Eventually(t, waitLimit, func() bool {
		if r.hostMu.TryRLock() {
			r.hostMu.RUnlock()
			return false
		}
		return true
	}, "Restore asking to run alone")
	if got := st.calls(); len(got) != 0 {
		t.Fatalf("store calls = %q while form a was being saved, want none", got)
	}

	st.release <- struct{}{}
	if err := receive(t, host, "Host of form a"); err != nil {
		t.Fatal(err)
	}
	res := receive(t, done, "Restore")
	if res.err != nil {
		t.Fatal(res.err)
	}
	if got, want := st.calls(), []string{"save a", "load"}; !slices.Equal(got, want) {
		t.Errorf("store calls = %q, want %q", got, want)
	}
	if len(res.forms) != 1 || res.forms[0].FormID != "a" {
		t.Errorf("Restore returned %+v, want form a as saved", res.forms)
	}
}

func TestHostWaitsForRestore(t *testing.T) {
	st := newGateStore("")
	st.gateLoad = true
	r := New(Config{Store: st})
	done := make(chan error, 1)
	go func() {
		_, err := r.Restore(context.Background())
		done <- err
	}()
	receive(t, st.entered, "Restore reading the store")

	host := hostAsync(r, oneField("b", "first"))
	// A Host that does not wait saves within moments; give it half a
	// second to show itself. (One that waits cannot be told apart from
	// one not yet scheduled, so the wait is bounded, not proven.)
	select {
	case err := <-host:
		t.Fatalf("Host finished (err %v) while Restore was reading the store", err)
	case <-time.After(500 * time.Millisecond):
	}
	if got := st.calls(); len(got) != 0 {
		t.Fatalf("store calls while Restore was reading the store: %q", got)
	}

	st.release <- struct{}{}
	if err := receive(t, done, "Restore"); err != nil {
		t.Fatal(err)
	}
	if err := receive(t, host, "Host of form b"); err != nil {
		t.Fatal(err)
	}
	if got, want := st.calls(), []string{"load", "save b"}; !slices.Equal(got, want) {
		t.Errorf("store calls = %q, want %q", got, want)
	}
}

func TestFormLocksForgetIdleForms(t *testing.T) {
	tests := []struct {
		name  string
		store func() *memStore
		op    func(r *Registry, formID string)
	}{
		{"host and unhost", newMemStore, func(r *Registry, id string) {
			_ = r.Host(context.Background(), oneField(id, "o"))
			_, _ = r.Unhost(context.Background(), id)
		}},
		{"refresh", newMemStore, func(r *Registry, id string) {
			_, _, _ = r.RefreshForm(context.Background(), id)
		}},
		{"store down", func() *memStore {
			m := newMemStore()
			m.setFail(errDown)
			return m
		}, func(r *Registry, id string) {
			_ = r.Host(context.Background(), oneField(id, "o"))
			_, _, _ = r.RefreshForm(context.Background(), id)
		}},
		{"invalid form", newMemStore, func(r *Registry, id string) {
			_ = r.Host(context.Background(), oneField(id+" !", "o"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(Config{Store: tt.store()})
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 50 {
						// Workers share half of the form ids.
						tt.op(r, fmt.Sprintf("form-%d", (i+w*25)%100))
					}
				}()
			}
			wg.Wait()
			n := r.formLocks.Len()
			if n != 0 {
				t.Errorf("%d form locks are kept after every operation ended, want 0", n)
			}
		})
	}
}
