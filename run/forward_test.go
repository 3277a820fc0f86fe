package run

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/assent-run/assent/internal/testwait"
	"github.com/assent-run/assent/store"
)

// fakeBus carries Signals between the Managers of a test, as the event bus
// the nodes share does: asynchronously, and only to the node named.
type fakeBus struct {
	mu      sync.Mutex
	nodes   map[string]*Manager
	signals []Signal
	wg      sync.WaitGroup
}

func (b *fakeBus) send(_ string, s Signal) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.signals = append(b.signals, s)
	if m := b.nodes[s.Node]; m != nil {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			_ = m.HandleSignal(context.Background(), s)
		}()
	}
}

func (b *fakeBus) sent() []Signal {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Signal(nil), b.signals...)
}

// twoNodes is node "a", which supervises the Runs of the tests, and node
// "b", which is asked about them; each has its own data directory, as on
// two machines. present says whether node a hears its Signals.
type twoNodes struct {
	f    *fixture
	bus  *fakeBus
	a, b *Manager
}

func newTwoNodes(t *testing.T, present bool) *twoNodes {
	t.Helper()
	f := newFixture(t)
	bus := &fakeBus{nodes: map[string]*Manager{}}
	// Waiting for an absent node lasts the whole wait: keep it short.
	wait := 5 * time.Second
	if !present {
		wait = 300 * time.Millisecond
	}
	open := func(node string) *Manager {
		m, err := New(t.Context(), Config{Store: f.db, DataDir: t.TempDir(), PollInterval: 20 * time.Millisecond, Node: node,
			Leases: f.db.Cluster(), LeaseTTL: time.Minute, Signal: bus.send, ForwardWait: wait})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			bus.wg.Wait()
			m.Close()
		})
		return m
	}
	n := &twoNodes{f: f, bus: bus, a: open("a"), b: open("b")}
	if present {
		bus.nodes["a"] = n.a
	}
	bus.nodes["b"] = n.b
	return n
}

// spawnA starts Run id on node a for alice, declaring Control poke.
func (n *twoNodes) spawnA(t *testing.T, id, template string) *Run {
	t.Helper()
	def, _ := json.Marshal(map[string]any{"template": template, "control": []string{"poke"}})
	rec, err := DecodeRecipe(def)
	if err != nil {
		t.Fatal(err)
	}
	v, err := n.a.Spawn(t.Context(), "alice", SpawnRequest{Definition: rec, RunID: id})
	if err != nil || v.Status != StatusRunning || v.Node != "a" {
		t.Fatalf("spawn %s on node a = %+v, %v", id, v, err)
	}
	t.Cleanup(func() { _, _ = n.a.Kill(context.Background(), "alice", id) })
	return v
}

func (n *twoNodes) control(t *testing.T, id string) store.Control {
	t.Helper()
	cs, err := n.f.db.Controls(t.Context(), id)
	if err != nil || len(cs) != 1 {
		t.Fatalf("journal of %s = %+v, %v; want one record", id, cs, err)
	}
	return cs[0]
}

func TestForwardedControlDelivered(t *testing.T) {
	n := newTwoNodes(t, true)
	// The service holds its FIFO open: a written Control is delivered.
	v := n.spawnA(t, "held", `exec 3<>"$ASSENT_CONTROL_FIFO"; echo > "$ASSENT_STATE_DIR/ready"; exec sleep 300`)
	waitFile(t, filepath.Join(v.StateDir, "ready"))
	res, err := n.b.Apply(t.Context(), "alice", "held", "poke", json.RawMessage(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	d := res.Delivery
	if d == nil || d.Delivery != "delivered" || d.Node != "a" || d.Bytes == 0 || d.ControlID == "" {
		t.Fatalf("control applied on node b = %+v; want delivered by node a", d)
	}
	if c := n.control(t, "held"); c.Status != store.ControlDelivered || c.ID != d.ControlID || c.SenderID != "alice" {
		t.Errorf("journal record = %+v; want the Control delivered", c)
	}
	sig := n.bus.sent()
	if len(sig) != 1 || sig[0] != (Signal{Kind: SignalControl, Run: "held", Node: "a", ControlID: d.ControlID}) {
		t.Errorf("signals = %+v; want one control signal to node a", sig)
	}
	b, _ := json.Marshal(sig[0])
	if strings.Contains(string(b), `"n"`) {
		t.Errorf("the signal %s carries the Control's input", b)
	}
}

func TestForwardedControlOutcomes(t *testing.T) {
	tests := []struct {
		name     string
		present  bool
		template string
		code     string // error code, or "" for a result
		delivery string
		status   string // journal record after Apply
	}{
		// No reader on the FIFO: the supervising node records the failure,
		// and node b answers as the local path does.
		{"no reader", true, "exec sleep 300", CodeEndpointNotReady, "", store.ControlFailed},
		// Node a never hears of it: admitted and still queued, said so.
		{"supervisor absent", false, `exec 3<>"$ASSENT_CONTROL_FIFO"; exec sleep 300`, "", "queued", store.ControlQueued},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newTwoNodes(t, tt.present)
			n.spawnA(t, "r", tt.template)
			res, err := n.b.Apply(t.Context(), "alice", "r", "poke", nil)
			var e *Error
			switch {
			case tt.code != "" && (!errors.As(err, &e) || e.Code != tt.code || e.Details["node"] != "a"):
				t.Errorf("Apply = %+v, %v; want %s naming node a", res.Delivery, err, tt.code)
			case tt.code == "" && (err != nil || res.Delivery.Delivery != tt.delivery || res.Delivery.Node != "a" || res.Delivery.Message == ""):
				t.Errorf("Apply = %+v, %v; want delivery %s by node a, explained", res.Delivery, err, tt.delivery)
			}
			if c := n.control(t, "r"); c.Status != tt.status {
				t.Errorf("journal record = %+v; want %s", c, tt.status)
			}
		})
	}
}

func TestQueuedControlDeliveredBySweep(t *testing.T) {
	n := newTwoNodes(t, false)
	v := n.spawnA(t, "late", `exec 3<>"$ASSENT_CONTROL_FIFO"; echo > "$ASSENT_STATE_DIR/ready"; exec sleep 300`)
	waitFile(t, filepath.Join(v.StateDir, "ready"))
	res, err := n.b.Apply(t.Context(), "alice", "late", "poke", nil)
	if err != nil || res.Delivery.Delivery != "queued" {
		t.Fatalf("Apply = %+v, %v; want queued", res.Delivery, err)
	}
	// Node b's sweep touches nothing of node a's.
	if err := n.b.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c := n.control(t, "late"); c.Status != store.ControlQueued {
		t.Fatalf("after node b's sweep: %+v; want still queued", c)
	}
	// Node a, sweeping (as when it starts or missed events), delivers it.
	if err := n.a.Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c := n.control(t, "late"); c.Status != store.ControlDelivered {
		t.Errorf("after node a's sweep: %+v; want delivered", c)
	}
}

func TestForwardedKill(t *testing.T) {
	n := newTwoNodes(t, true)
	v := n.spawnA(t, "victim", "exec sleep 300")
	if _, err := n.b.Kill(t.Context(), "mallory", "victim"); !isCode(err, CodeNotFound) {
		t.Fatalf("kill by another owner: %v; want not_found", err)
	}
	if len(n.bus.sent()) != 0 {
		t.Fatalf("a refused kill was signalled: %+v", n.bus.sent())
	}
	res, err := n.b.Kill(t.Context(), "alice", "victim")
	if err != nil || !res.Killed || res.Node != "a" || res.PID != v.PID || res.Signal != "SIGKILL" {
		t.Fatalf("kill on node b = %+v, %v; want killed by node a", res, err)
	}
	r := n.f.waitEnded("victim")
	if r.Stop != string(StatusKilled) {
		t.Errorf("record after the kill = stop %q; want killed", r.Stop)
	}
	if kinds := traceKinds(t, n.f, "victim"); !strings.Contains(strings.Join(kinds, ","), "run.kill") {
		t.Errorf("trace = %v; want run.kill", kinds)
	}
	// Nothing is left in the store.
	if left, _ := n.f.db.PendingRunRequests(t.Context(), "a"); len(left) != 0 {
		t.Errorf("requests left: %+v", left)
	}
	// Killing again is answered locally: not running.
	if res, err := n.b.Kill(t.Context(), "alice", "victim"); err != nil || res.Killed || res.Status != StatusKilled {
		t.Errorf("second kill = %+v, %v; want not running (killed)", res, err)
	}
}

func TestForwardedLogs(t *testing.T) {
	n := newTwoNodes(t, true)
	n.spawnA(t, "talker", `echo "hello from a"; echo oops >&2; exec sleep 300`)
	var out string
	testwait.Eventually(t, 10*time.Second, func() bool {
		var err error
		if out, err = n.b.Logs(t.Context(), "alice", "talker", "stdout", 10); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(out, "hello from a")
	}, "node a's stdout on node b")
	if out != "hello from a\n" {
		t.Errorf("stdout from node b = %q; want node a's log", out)
	}
	if errText, err := n.b.Logs(t.Context(), "alice", "talker", "stderr", 0); err != nil || errText != "oops\n" {
		t.Errorf("stderr from node b = %q, %v", errText, err)
	}
	if _, err := n.b.Logs(t.Context(), "mallory", "talker", "stdout", 0); !isCode(err, CodeNotFound) {
		t.Errorf("logs for another owner: %v; want not_found", err)
	}
	for _, s := range n.bus.sent() {
		if s.Kind != SignalLogs || s.Node != "a" || s.Request == "" {
			t.Errorf("signal %+v; want logs signals to node a naming a request", s)
		}
	}
	if left, _ := n.f.db.DeleteRunRequestsBefore(t.Context(), time.Now().Add(time.Hour)); left != 0 {
		t.Errorf("%d requests left in the store", left)
	}
}

func TestForwardedLogsNodeUnavailable(t *testing.T) {
	tests := []struct {
		name string
		lost bool
	}{
		// Node a never answers: node b gives up after its wait.
		{"node away", false},
		// The Run was found lost: node b does not wait for its node.
		{"run lost", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newTwoNodes(t, false)
			v := n.spawnA(t, "quiet", "exec sleep 300")
			t.Cleanup(func() { _ = syscall.Kill(-v.PID, syscall.SIGKILL) })
			if tt.lost {
				lost := Lost{Node: "a", DetectedBy: "b"}
				if _, _, err := n.b.markLost(t.Context(), "quiet", lost, time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			_, err := n.b.Logs(t.Context(), "alice", "quiet", "stdout", 0)
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeNodeUnavailable || !strings.Contains(e.Message, "node a") || e.Details["node"] != "a" {
				t.Errorf("logs: %v; want node_unavailable naming node a", err)
			}
			if sent := len(n.bus.sent()); sent != map[bool]int{false: 1, true: 0}[tt.lost] {
				t.Errorf("%d signals sent", sent)
			}
		})
	}
}

// TestForgedSignalsIgnored sends node a Signals that are each wrong in one
// way only: the request or Control they name would be carried out if the
// check the case is named after were missing. A request that is acted on
// kills the Run.
func TestForgedSignalsIgnored(t *testing.T) {
	n := newTwoNodes(t, true)
	v := n.spawnA(t, "target", `exec 3<>"$ASSENT_CONTROL_FIFO"; exec sleep 300`)
	ctx := t.Context()
	// kill is a request node a carries out when a Signal names it.
	kill := func(id string) store.RunRequest {
		return store.RunRequest{ID: id, RunID: "target", InstanceID: v.InstanceID, Node: "a", Kind: store.RunRequestKill, RequestedAt: time.Now()}
	}
	// A queued Control of an older generation: the store keeps it until
	// someone fails it, and it must never reach this generation's FIFO.
	q := time.Now()
	foreign, err := n.f.db.AdmitControl(ctx, "target", store.Control{ID: "foreign", InstanceID: "an-older-generation", Action: "poke", QueuedAt: &q})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = n.f.db.TransitionControl(context.Background(), "target", foreign.ID, store.ControlFailed, nil, "test over", time.Now())
	})

	tests := []struct {
		name string
		// req, when set, is added before the Signal is sent.
		req func() store.RunRequest
		// answered, when set, is recorded as req's answer before the
		// Signal is sent.
		answered string
		sig      Signal
		// want is a text the answer of req contains, or "" when req must
		// stay unanswered.
		want string
	}{
		{name: "no such request",
			sig: Signal{Kind: SignalKill, Run: "target", Node: "a", Request: "no-such-request"}},
		{name: "signal for another node", req: func() store.RunRequest { return kill("for-a") },
			sig: Signal{Kind: SignalKill, Run: "target", Node: "b", Request: "for-a"}},
		{name: "request about another Run", req: func() store.RunRequest { return kill("about-target") },
			sig: Signal{Kind: SignalKill, Run: "other", Node: "a", Request: "about-target"}},
		{name: "invalid Run id", req: func() store.RunRequest {
			q := kill("escape")
			q.RunID = "../escape"
			return q
		}, sig: Signal{Kind: SignalKill, Run: "../escape", Node: "a", Request: "escape"}},
		{name: "request for another node", req: func() store.RunRequest {
			q := kill("for-b")
			q.Node = "b"
			return q
		}, sig: Signal{Kind: SignalKill, Run: "target", Node: "a", Request: "for-b"}},
		{name: "request answered already", req: func() store.RunRequest { return kill("done") },
			answered: "answered before",
			sig:      Signal{Kind: SignalKill, Run: "target", Node: "a", Request: "done"}, want: "answered before"},
		{name: "another generation", req: func() store.RunRequest {
			q := kill("stale")
			q.InstanceID = "an-older-generation"
			return q
		}, sig: Signal{Kind: SignalKill, Run: "target", Node: "a", Request: "stale"}, want: "generation changed"},
		{name: "unknown kind", req: func() store.RunRequest { return kill("restart") },
			sig: Signal{Kind: "restart", Run: "target", Node: "a", Request: "restart"}},
		{name: "Control of another generation",
			sig: Signal{Kind: SignalControl, Run: "target", Node: "a", ControlID: foreign.ID}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req store.RunRequest
			if tt.req != nil {
				req = tt.req()
				if err := n.f.db.AddRunRequest(ctx, req); err != nil {
					t.Fatal(err)
				}
				if tt.answered != "" {
					if err := n.f.db.AnswerRunRequest(ctx, req.ID, tt.answered, "", time.Now()); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := n.a.HandleSignal(ctx, tt.sig); err != nil {
				t.Errorf("HandleSignal(%+v): %v", tt.sig, err)
			}
			r, err := n.f.db.Run(ctx, "target")
			if err != nil || r.Stop != "" || !r.EndedAt.IsZero() {
				t.Fatalf("Run after the signal = stop %q ended %v, %v; want running", r.Stop, r.EndedAt, err)
			}
			if s, _ := n.a.status(r); s != StatusRunning {
				t.Fatalf("status after the signal = %s; want running", s)
			}
			if tt.req != nil {
				got, err := n.f.db.RunRequest(ctx, req.ID)
				switch {
				case err != nil:
					t.Errorf("request %s: %v", req.ID, err)
				case tt.want == "" && got.Answered():
					t.Errorf("request %s answered: %q %q; want it unanswered", req.ID, got.Text, got.Error)
				case tt.want != "" && (!got.Answered() || !strings.Contains(got.Text, tt.want)):
					t.Errorf("request %s = %+v; want answered with %q", req.ID, got, tt.want)
				}
			}
			cs, err := n.f.db.Controls(ctx, "target")
			if err != nil || len(cs) != 1 || cs[0].ID != foreign.ID || cs[0].Status != store.ControlQueued {
				t.Errorf("journal after the signal = %+v, %v; want only the older generation's Control, queued", cs, err)
			}
		})
	}
}

func isCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// TestForwardedRequestsBounded checks that one node waits on at most
// maxAsking requests for one Run at once: the next is refused with
// rate_limited, writing no request and sending no Signal.
func TestForwardedRequestsBounded(t *testing.T) {
	n := newTwoNodes(t, false)
	// Long enough that no waiting request ends before the last is sent.
	n.b.cfg.ForwardWait = 3 * time.Second
	v := n.spawnA(t, "quiet", "exec sleep 300")
	t.Cleanup(func() { _ = syscall.Kill(-v.PID, syscall.SIGKILL) })
	errs := make(chan error, maxAsking)
	for range maxAsking {
		go func() {
			_, err := n.b.Logs(t.Context(), "alice", "quiet", "stdout", 0)
			errs <- err
		}()
	}
	// Wait until every waiting request has been signalled.
	testwait.EventuallyC(t, 10*time.Second, func(c *testwait.C) {
		if sent := len(n.bus.sent()); sent < maxAsking {
			c.Errorf("%d of %d requests signalled", sent, maxAsking)
		}
	}, "every waiting request signalled")
	_, err := n.b.Logs(t.Context(), "alice", "quiet", "stdout", 0)
	if !isCode(err, CodeRateLimited) {
		t.Errorf("request %d: %v; want rate_limited", maxAsking+1, err)
	}
	if sent := len(n.bus.sent()); sent != maxAsking {
		t.Errorf("%d signals sent; the refused request sent one", sent)
	}
	for range maxAsking {
		if err := <-errs; !isCode(err, CodeNodeUnavailable) {
			t.Errorf("a waiting request: %v; want node_unavailable", err)
		}
	}
}

// traceOn returns the Trace view of Run id that node m gives alice.
func traceOn(ctx context.Context, t *testing.T, m *Manager, id, source string) *TraceView {
	t.Helper()
	v, err := m.Inspect(ctx, "alice", InspectRequest{Target: "run:" + id, View: "trace", Source: source})
	if err != nil {
		t.Fatalf("trace of %s: %v", id, err)
	}
	return v.(*TraceView)
}

// processItems returns the process items of v by ID.
func processItems(v *TraceView) map[string]TraceItem {
	out := map[string]TraceItem{}
	for _, it := range v.Items {
		if it.Source == "process" {
			out[it.ID] = it
		}
	}
	return out
}

func TestForwardedTraceTails(t *testing.T) {
	n := newTwoNodes(t, true)
	n.spawnA(t, "talker", `echo "hello from a"; echo "password=hunter2"; echo oops >&2; exec sleep 300`)
	var items map[string]TraceItem
	testwait.Eventually(t, 10*time.Second, func() bool {
		items = processItems(traceOn(t.Context(), t, n.b, "talker", "all"))
		return len(items) >= 2
	}, "node a's stdout and stderr in node b's trace")
	out, errs := items["process:stdout"], items["process:stderr"]
	if out.Kind != "process.stdout" || !strings.HasPrefix(out.Detail.Tail, "hello from a\n") {
		t.Errorf("stdout item on node b = %+v; want node a's stdout", out)
	}
	if strings.Contains(out.Detail.Tail, "hunter2") || !strings.Contains(out.Detail.Tail, "password="+redactedMarker) {
		t.Errorf("stdout tail %q; want the secret redacted", out.Detail.Tail)
	}
	if errs.Kind != "process.stderr" || errs.Detail.Tail != "oops\n" || errs.Level != "warning" {
		t.Errorf("stderr item on node b = %+v; want node a's stderr, a warning", errs)
	}
	// The items are dated when node a answered, which it recorded.
	for _, it := range []TraceItem{out, errs} {
		if ts, err := time.Parse(time.RFC3339Nano, it.TS); err != nil || time.Since(ts) > time.Minute || time.Until(ts) > time.Minute {
			t.Errorf("%s dated %q; want the time of the answer", it.ID, it.TS)
		}
	}
	// Only process items are asked for.
	if got := processItems(traceOn(t.Context(), t, n.b, "talker", "process")); len(got) != 2 {
		t.Errorf("source=process gives %d process items; want 2", len(got))
	}
	for _, s := range n.bus.sent() {
		if s.Kind != SignalLogs || s.Node != "a" || s.Run != "talker" {
			t.Errorf("signal %+v; want logs signals to node a", s)
		}
	}
	if left, _ := n.f.db.DeleteRunRequestsBefore(t.Context(), time.Now().Add(time.Hour)); left != 0 {
		t.Errorf("%d requests left in the store", left)
	}
	// The logs of another owner's Run are not read through its Trace.
	sent := len(n.bus.sent())
	if _, err := n.b.Inspect(t.Context(), "mallory", InspectRequest{Target: "run:talker", View: "trace"}); !isCode(err, CodeNotFound) {
		t.Errorf("trace for another owner: %v; want not_found", err)
	}
	if len(n.bus.sent()) != sent {
		t.Errorf("a refused trace sent signals: %+v", n.bus.sent()[sent:])
	}
}

// TestForwardedTraceNodeAway checks that a Trace view waits for a node
// that does not answer no longer than traceLogsWait, or the caller's
// context when that ends sooner, and then answers without process items.
func TestForwardedTraceNodeAway(t *testing.T) {
	tests := []struct {
		name    string
		timeout time.Duration // of the caller's context; 0 for none
		within  time.Duration
	}{
		{"bounded by the trace wait", 0, traceLogsWait + 5*time.Second},
		{"bounded by the caller", 300 * time.Millisecond, traceLogsWait},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newTwoNodes(t, false)
			// Far longer than either bound: only they end the wait.
			n.b.cfg.ForwardWait = time.Minute
			v := n.spawnA(t, "quiet", `echo "hello from a"; exec sleep 300`)
			t.Cleanup(func() { _ = syscall.Kill(-v.PID, syscall.SIGKILL) })
			ctx := t.Context()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			start := time.Now()
			view := traceOn(ctx, t, n.b, "quiet", "all")
			if took := time.Since(start); took >= tt.within {
				t.Errorf("trace took %s; want less than %s", took, tt.within)
			}
			if got := processItems(view); len(got) != 0 {
				t.Errorf("process items %+v; want none", got)
			}
			if len(view.Items) == 0 {
				t.Error("trace has no items; want the Run's lifecycle")
			}
			// stdout and stderr were asked for at once, and withdrawn.
			if sent := n.bus.sent(); len(sent) != 2 || sent[0].Kind != SignalLogs || sent[1].Kind != SignalLogs {
				t.Errorf("signals %+v; want two logs signals", sent)
			}
			if left, _ := n.f.db.DeleteRunRequestsBefore(t.Context(), time.Now().Add(time.Hour)); left != 0 {
				t.Errorf("%d requests left in the store", left)
			}
		})
	}
}

// TestForwardedTraceNotAsked checks the Trace views that do not ask the
// supervising node for log tails, though it would answer: each answers
// without error, sending no Signal.
func TestForwardedTraceNotAsked(t *testing.T) {
	tests := []struct {
		name     string
		template string
		source   string
		prepare  func(t *testing.T, n *twoNodes, v *Run)
		// local says the view reads the logs where the record says they
		// are, which both nodes of the test reach; otherwise it shows no
		// process items.
		local bool
		// localOnly asks for the view without what another node gives.
		localOnly bool
	}{
		{name: "archived Run", template: `echo "hello from a"; exec sleep 300`, source: "all", local: true,
			prepare: func(t *testing.T, n *twoNodes, v *Run) {
				if _, err := n.a.Kill(t.Context(), "alice", v.ID); err != nil {
					t.Fatal(err)
				}
				n.f.waitEnded(v.ID)
				if _, err := n.a.Archive(t.Context(), "alice", v.ID); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "lost Run", template: `echo "hello from a"; exec sleep 300`, source: "all",
			prepare: func(t *testing.T, n *twoNodes, v *Run) {
				if _, _, err := n.b.markLost(t.Context(), v.ID, Lost{Node: "a", DetectedBy: "b"}, time.Now()); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "source without process items", template: `echo "hello from a"; exec sleep 300`, source: "lifecycle"},
		{name: "a caller that reads the logs itself", template: `echo "hello from a"; exec sleep 300`, source: "all", localOnly: true},
		{name: "requests for the Run at their bound", template: `echo "hello from a"; exec sleep 300`, source: "all",
			prepare: func(t *testing.T, n *twoNodes, v *Run) {
				n.b.mu.Lock()
				n.b.asking[v.ID] = maxAsking
				n.b.mu.Unlock()
				t.Cleanup(func() {
					n.b.mu.Lock()
					delete(n.b.asking, v.ID)
					n.b.mu.Unlock()
				})
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newTwoNodes(t, true)
			v := n.spawnA(t, "r", tt.template)
			t.Cleanup(func() { _ = syscall.Kill(-v.PID, syscall.SIGKILL) })
			// Node a has written the line it would answer with.
			testwait.Eventually(t, 10*time.Second, func() bool {
				out, err := n.a.Logs(t.Context(), "alice", v.ID, "stdout", 0)
				return err == nil && out != ""
			}, "node a writing stdout")
			if tt.prepare != nil {
				tt.prepare(t, n, v)
			}
			got, err := n.b.Inspect(t.Context(), "alice", InspectRequest{Target: "run:" + v.ID, View: "trace", Source: tt.source, LocalOnly: tt.localOnly})
			if err != nil {
				t.Fatalf("trace of %s: %v", v.ID, err)
			}
			view := got.(*TraceView)
			if got := processItems(view); len(got) != 0 && !tt.local {
				t.Errorf("process items %+v; want none", got)
			}
			if sent := n.bus.sent(); len(sent) != 0 {
				t.Errorf("signals %+v; want none", sent)
			}
		})
	}
}

func TestLastBytes(t *testing.T) {
	tests := []struct {
		s     string
		limit int
		want  string
	}{
		{"", 4, ""},
		{"abc\n", 4, "abc\n"},
		{"abcdef\n", 4, "def\n"},
		{"aéb\n", 4, "éb\n"},
		// A cut inside a rune moves on to the next rune.
		{"aéb\n", 3, "b\n"},
	}
	for _, tt := range tests {
		if got := lastBytes(tt.s, tt.limit); got != tt.want {
			t.Errorf("lastBytes(%q, %d) = %q; want %q", tt.s, tt.limit, got, tt.want)
		}
	}
}
