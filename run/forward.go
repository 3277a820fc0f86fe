package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"

	"github.com/assent-run/assent/wire"
)

// Several nodes share one store; a Run's process, logs and Control FIFO
// live on the machine of the node that supervises it (the node its record
// names). A node asked to act on a Run another node supervises does not
// touch that machine: it writes what it asks into the store (a Control
// into the journal, a kill or logs request into the Run requests) and
// sends the supervising node a Signal naming it. The supervising node
// reads the Run and the request back from the store and acts only on what
// the store holds; the asking node waits, bounded, for the store to record
// the outcome. A Signal is a hint, never an order: a forged or stale one
// finds nothing to act on.

// Kinds of Signal.
const (
	// SignalControl: a Control of the Run waits, queued, for delivery.
	SignalControl = "control"
	// SignalKill: a kill request of the Run waits for an answer.
	SignalKill = "kill"
	// SignalLogs: a logs request of the Run waits for an answer.
	SignalLogs = "logs"
)

// SignalEventType is the type of the event that carries a Signal between
// nodes.
const SignalEventType = "run.signal"

// CodeNodeUnavailable is the error code of a request the node supervising
// the Run did not answer in time.
const CodeNodeUnavailable = string(wire.NodeUnavailable)

// DefaultForwardWait is how long a node waits for the supervising node
// when Config.ForwardWait is zero.
const DefaultForwardWait = 5 * time.Second

// forwardPoll is how often a waiting node reads the store again.
const forwardPoll = 20 * time.Millisecond

// maxAsking bounds the requests (kill, logs) one node waits on at once for
// one Run; past it a request is refused with rate_limited, so a caller
// cannot fill the store and the event log with requests for one Run.
const maxAsking = 4

// staleRequestAge is the age past which a Run request nobody deleted
// (its asking node died while waiting) is removed.
const staleRequestAge = 10 * time.Minute

// Signal tells the node supervising a Run that something waits for it in
// the store. It carries names only: no Control input, no log text.
type Signal struct {
	// Kind is SignalControl, SignalKill or SignalLogs.
	Kind string `json:"kind"`
	// Run names the Run; Node the supervising node the Signal is for.
	Run  string `json:"run"`
	Node string `json:"node"`
	// ControlID names the queued Control (SignalControl).
	ControlID string `json:"control_id,omitempty"`
	// Request names the Run request (SignalKill, SignalLogs).
	Request string `json:"request,omitempty"`
}

// forwarding reports whether this Manager takes part in passing requests
// between nodes: it has a node name and a way to signal other nodes. A
// Manager alone on its store (no Signal) acts on every Run itself and has
// no requests to answer.
func (m *Manager) forwarding() bool { return m.cfg.Signal != nil && m.cfg.Node != "" }

// supervisor returns the node that supervises r's current generation when
// it is another node this Manager forwards to, or "".
func (m *Manager) supervisor(r store.RunRecord) string {
	if m.cfg.Signal == nil {
		return ""
	}
	if n := decodeDoc(r).Node; n != "" && n != m.cfg.Node {
		return n
	}
	return ""
}

func (m *Manager) forwardWait() time.Duration {
	if m.cfg.ForwardWait > 0 {
		return m.cfg.ForwardWait
	}
	return DefaultForwardWait
}

// await calls check every forwardPoll until it reports done, fails, ctx
// ends or the forward wait passes; done is false in the last case.
func (m *Manager) await(ctx context.Context, check func() (bool, error)) (bool, error) {
	deadline := time.NewTimer(m.forwardWait())
	defer deadline.Stop()
	tick := time.NewTicker(forwardPoll)
	defer tick.Stop()
	for {
		done, err := check()
		if done || err != nil {
			return done, err
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-deadline.C:
			return check()
		case <-tick.C:
		}
	}
}

// awaitDelivery waits for the supervising node to deliver Control c,
// which this node admitted, and answers as the local path does.
func (m *Manager) awaitDelivery(ctx context.Context, r store.RunRecord, node string, c store.Control) (*ControlDelivery, error) {
	id := r.ID
	var got store.Control
	done, err := m.await(ctx, func() (bool, error) {
		x, err := m.st.Control(ctx, id, c.ID)
		if errors.Is(err, store.ErrNotFound) {
			// Gone from the journal: the Run was pruned or restarted.
			return false, errorf(CodeNotFound, "Control %s of run:%s is no longer in its journal; inspect target=run:%s view=control", c.ID, id, id)
		}
		if err != nil {
			return false, err
		}
		got = x
		return x.Status != store.ControlQueued, nil
	})
	if err != nil {
		return nil, err
	}
	res := &ControlDelivery{Action: c.Action, ControlID: c.ID, Delivery: "delivered", EndpointType: "fifo",
		NextActions: []tool.Next{inspectNext("run:"+id, "control")}, Run: id, InstanceID: r.InstanceID, Node: node}
	switch {
	case !done:
		res.Delivery = "queued"
		res.Message = fmt.Sprintf("The Control is admitted and queued; node %s, which supervises the Run, has not delivered it yet. It delivers queued Controls when it next hears of them or starts; inspect the Run's Controls to follow it.", node)
		return res, nil
	case got.Status == store.ControlFailed:
		reason, msg := CodeDeliveryFailed, "Run Control delivery failed on node "+node+": "+got.Error
		if got.Error == endpointNotReadyStored {
			reason, msg = CodeEndpointNotReady, "Run Control endpoint is not ready."
		}
		return nil, &Error{Code: reason, Message: msg, Details: map[string]any{"action": c.Action, "control_id": c.ID,
			"run": id, "run_instance_id": r.InstanceID, "endpoint_type": "fifo", "node": node}}
	}
	res.Bytes = len(WireRecord(c.ID, c.Action, c.Input))
	if got.Status != store.ControlDelivered {
		// The service claimed (or settled) it already.
		res.Delivery = got.Status
	}
	return res, nil
}

// deliverQueued writes the queued Controls of Run id's current
// generation, in journal order, to its FIFO when this node supervises it,
// recording each delivered or failed as the local path does. It serves
// Controls other nodes admitted, and, at start, those a stop of this node
// left queued between their admission and their delivery.
func (m *Manager) deliverQueued(ctx context.Context, id string) error {
	unlock := m.lock(id)
	defer unlock()
	r, err := m.st.Run(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	d := decodeDoc(r)
	if d.Node != m.cfg.Node || !r.EndedAt.IsZero() || r.Archived {
		return nil
	}
	cs, err := m.st.Controls(ctx, id)
	if err != nil {
		return err
	}
	changed := false
	for _, c := range cs {
		if c.Status != store.ControlQueued || c.InstanceID != r.InstanceID {
			continue
		}
		changed = true
		if _, derr := writeFIFO(d.FIFO, WireRecord(c.ID, c.Action, c.Input)); derr != nil {
			stored := "Run Control delivery failed: " + derr.Error()
			if errors.Is(derr, errNoReader) {
				stored = endpointNotReadyStored
			}
			if _, err := m.st.TransitionControl(ctx, id, c.ID, store.ControlFailed, []string{store.ControlQueued}, stored, m.now()); err != nil && !errors.Is(err, store.ErrConflict) {
				return err
			}
			continue
		}
		if _, err := m.st.TransitionControl(ctx, id, c.ID, store.ControlDelivered, nil, "", m.now()); err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	if changed {
		m.notify(r.OwnerID, id, "run.control")
	}
	return nil
}

// HandleSignal acts on a Signal another node sent: when it is for this
// node, it delivers the Run's queued Controls or answers the Run request
// it names. Everything it acts on is read from the store; a Signal for
// another node, or one the store does not bear out, does nothing.
func (m *Manager) HandleSignal(ctx context.Context, s Signal) error {
	if !m.forwarding() || s.Node != m.cfg.Node || ValidRunID(s.Run) != nil {
		return nil
	}
	if !m.enter() {
		return nil
	}
	defer m.wg.Done()
	switch s.Kind {
	case SignalControl:
		return m.deliverQueued(ctx, s.Run)
	case SignalKill, SignalLogs:
		q, err := m.st.RunRequest(ctx, s.Request)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if q.RunID != s.Run {
			return nil
		}
		return m.answer(ctx, q)
	}
	return nil
}

// Sweep acts on everything the store holds for this node that a missed
// Signal may have left: it answers the Run requests waiting for this node,
// delivers the queued Controls of the Runs it supervises, and removes Run
// requests too old to be waited for.
func (m *Manager) Sweep(ctx context.Context) error {
	if !m.forwarding() {
		return nil
	}
	if !m.enter() {
		return nil
	}
	defer m.wg.Done()
	err := m.sweepRequests(ctx)
	runs, lerr := m.st.ListRuns(ctx, "")
	if lerr != nil {
		return errors.Join(err, lerr)
	}
	for _, r := range runs {
		if r.EndedAt.IsZero() && !r.Archived && decodeDoc(r).Node == m.cfg.Node {
			err = errors.Join(err, m.deliverQueued(ctx, r.ID))
		}
	}
	return err
}

// sweepRequests answers the Run requests waiting for this node and removes
// stale ones.
func (m *Manager) sweepRequests(ctx context.Context) error {
	if !m.forwarding() {
		return nil
	}
	_, err := m.st.DeleteRunRequestsBefore(ctx, m.now().Add(-staleRequestAge))
	qs, qerr := m.st.PendingRunRequests(ctx, m.cfg.Node)
	if qerr != nil {
		return errors.Join(err, qerr)
	}
	for _, q := range qs {
		err = errors.Join(err, m.answer(ctx, q))
	}
	return err
}

// answer carries out Run request q when it is for this node and still
// unanswered, and records the answer.
func (m *Manager) answer(ctx context.Context, q store.RunRequest) error {
	if q.Node != m.cfg.Node || q.Answered() {
		return nil
	}
	var text string
	var err error
	switch q.Kind {
	case store.RunRequestKill:
		var res *KillResult
		if res, err = m.killRequested(ctx, q); err == nil {
			b, _ := json.Marshal(res)
			text = string(b)
		}
	case store.RunRequestLogs:
		text, err = m.logsRequested(ctx, q)
	default:
		err = errorf(CodeInvalidRequest, "unknown Run request kind %q", q.Kind)
	}
	code := ""
	if err != nil {
		// An error without a code of its own (a file or store failure).
		code, text = "internal", err.Error()
		var e *Error
		if errors.As(err, &e) {
			code, text = e.Code, e.Message
		}
	}
	err = m.st.AnswerRunRequest(ctx, q.ID, text, code, m.now())
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
		return nil // withdrawn, or answered already
	}
	return err
}

// killRequested kills the Run of kill request q when the store says this
// node supervises its running generation q.InstanceID.
func (m *Manager) killRequested(ctx context.Context, q store.RunRequest) (*KillResult, error) {
	unlock := m.lock(q.RunID)
	defer unlock()
	r, err := m.st.Run(ctx, q.RunID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound(q.RunID)
	}
	if err != nil {
		return nil, err
	}
	if decodeDoc(r).Node != m.cfg.Node || r.InstanceID != q.InstanceID {
		status, _ := m.status(r)
		return &KillResult{Reason: "generation changed", Status: status, Node: m.cfg.Node}, nil
	}
	res, err := m.killLocked(ctx, r)
	if res != nil {
		res.Node = m.cfg.Node
	}
	return res, err
}

// logsRequested reads the log tail logs request q asks for, when this node
// supervises its Run.
func (m *Manager) logsRequested(ctx context.Context, q store.RunRequest) (string, error) {
	r, err := m.st.Run(ctx, q.RunID)
	if errors.Is(err, store.ErrNotFound) {
		return "", notFound(q.RunID)
	}
	if err != nil {
		return "", err
	}
	if n := decodeDoc(r).Node; n != m.cfg.Node {
		return "", errorf(CodeConflict, "Run %s is supervised by node %s now, not %s; ask again.", q.RunID, n, m.cfg.Node)
	}
	return m.tailLogs(r, q.Stream, q.Lines)
}

// request adds Run request q for node, signals it and waits for the
// answer. The request is deleted once waited for; answered is false when
// the node did not answer in time.
func (m *Manager) request(ctx context.Context, ownerID string, q store.RunRequest) (ans store.RunRequest, answered bool, err error) {
	m.mu.Lock()
	if m.asking[q.RunID] >= maxAsking {
		m.mu.Unlock()
		return ans, false, &Error{Code: CodeRateLimited, Message: fmt.Sprintf("%d requests for run:%s already wait for node %s; try again once they are answered.", maxAsking, q.RunID, q.Node),
			Details: map[string]any{"run": q.RunID, "node": q.Node, "limit": maxAsking}}
	}
	m.asking[q.RunID]++
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		if m.asking[q.RunID]--; m.asking[q.RunID] == 0 {
			delete(m.asking, q.RunID)
		}
		m.mu.Unlock()
	}()
	q.ID, q.RequestedAt = uuid.NewString(), m.now().UTC().Truncate(time.Millisecond)
	if err := m.st.AddRunRequest(ctx, q); err != nil {
		return ans, false, err
	}
	defer func() {
		if derr := m.st.DeleteRunRequest(context.WithoutCancel(ctx), q.ID); derr != nil && !errors.Is(derr, store.ErrNotFound) {
			m.log.Warn("delete run request", "run", q.RunID, "request", q.ID, "err", derr)
		}
	}()
	kind := SignalLogs
	if q.Kind == store.RunRequestKill {
		kind = SignalKill
	}
	m.cfg.Signal(ownerID, Signal{Kind: kind, Run: q.RunID, Node: q.Node, Request: q.ID})
	answered, err = m.await(ctx, func() (bool, error) {
		a, err := m.st.RunRequest(ctx, q.ID)
		ans = a
		return err == nil && a.Answered(), err
	})
	return ans, answered, err
}

// forwardKill asks node, which supervises Run r, to kill it and answers
// with what that node did.
func (m *Manager) forwardKill(ctx context.Context, r store.RunRecord, node string) (*KillResult, error) {
	ans, ok, err := m.request(ctx, r.OwnerID, store.RunRequest{RunID: r.ID, InstanceID: r.InstanceID, Node: node, Kind: store.RunRequestKill})
	if err != nil {
		return nil, err
	}
	if !ok {
		return &KillResult{Status: StatusRunning, Node: node, Reason: fmt.Sprintf(
			"node %s, which supervises the Run, did not answer within %s; the kill is withdrawn unless it was already under way. Inspect the Run's status, then kill again.", node, m.forwardWait())}, nil
	}
	if ans.Error != "" {
		return nil, &Error{Code: ans.Error, Message: ans.Text, Details: map[string]any{"node": node, "run": r.ID}}
	}
	var res KillResult
	if err := json.Unmarshal([]byte(ans.Text), &res); err != nil {
		return nil, fmt.Errorf("run: node %s answered the kill of %s unreadably: %w", node, r.ID, err)
	}
	res.Node = node
	return &res, nil
}

// forwardLogs asks node, which supervises Run r, for a tail of its logs.
func (m *Manager) forwardLogs(ctx context.Context, r store.RunRecord, node, stream string, n int) (string, error) {
	ans, err := m.askLogs(ctx, r, node, stream, n)
	if err != nil {
		return "", err
	}
	return ans.Text, nil
}

// askLogs asks node, which supervises Run r, for the last n lines of
// stream and returns its answer, whose AnsweredAt is when node recorded
// it. A node that does not answer within the forward wait gives
// node_unavailable; an answer node could not give, its error.
func (m *Manager) askLogs(ctx context.Context, r store.RunRecord, node, stream string, n int) (store.RunRequest, error) {
	ans, ok, err := m.request(ctx, r.OwnerID, store.RunRequest{RunID: r.ID, InstanceID: r.InstanceID, Node: node,
		Kind: store.RunRequestLogs, Stream: stream, Lines: n})
	if err != nil {
		return store.RunRequest{}, err
	}
	if !ok {
		return store.RunRequest{}, &Error{Code: CodeNodeUnavailable, Message: fmt.Sprintf(
			"The node %s, which supervises Run %s and keeps its logs, did not answer within %s. It may be down or busy: try again, or inspect target=run:%s view=status.",
			node, r.ID, m.forwardWait(), r.ID), Details: map[string]any{"node": node, "run": r.ID}}
	}
	if ans.Error != "" {
		return store.RunRequest{}, &Error{Code: ans.Error, Message: ans.Text, Details: map[string]any{"node": node, "run": r.ID}}
	}
	return ans, nil
}

// traceLogsWait bounds how long a Trace view waits, in all, for the log
// tails of a Run another node supervises.
const traceLogsWait = 2 * time.Second

// processTail is a tail of a Run's stdout or stderr and when it was read.
type processTail struct {
	text string
	at   time.Time
}

// remoteTails asks node, which supervises Run r, for the last n lines of
// its stdout and stderr at once, waiting at most traceLogsWait in all (less
// when ctx ends sooner). It returns the tails node answered, by stream; a
// stream node did not answer in time, could not answer, or that was
// refused (rate_limited) is missing. r must be a Run the caller may read
// the logs of.
func (m *Manager) remoteTails(ctx context.Context, r store.RunRecord, node string, n int) map[string]processTail {
	ctx, cancel := context.WithTimeout(ctx, traceLogsWait)
	defer cancel()
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		out = make(map[string]processTail, 2)
	)
	for _, stream := range []string{"stdout", "stderr"} {
		wg.Go(func() {
			ans, err := m.askLogs(ctx, r, node, stream, n)
			if err != nil {
				return
			}
			mu.Lock()
			out[stream] = processTail{text: ans.Text, at: ans.AnsweredAt}
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}
