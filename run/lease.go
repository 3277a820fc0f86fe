package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/assent-run/assent/run/recipe"
	"github.com/assent-run/assent/store"
)

// Several nodes on one store each supervise the Runs they started, and
// say so with a lease in the store that they renew. A LeaseKeeper is what
// a node runs for that: it acquires a lease when the node starts a Run,
// renews all of the node's leases periodically, releases a lease when a
// Run ends and, when it finds another node's lease expired, takes it over
// and marks that Run lost. When the lost Run's Recipe asks for a restart
// (RestartOnLost), the keeper keeps the lease and reports the Run, so the
// node starts its next generation.

// DefaultLeaseTTL is the time to live of a Run lease when LeaseConfig sets
// none: a Run whose node dies is found lost within about this time plus
// one renewal interval (a third of it).
const DefaultLeaseTTL = 15 * time.Second

// RestartOnLost is the value of a Recipe's "restart" field asking that a
// lost Run be started again, as a new generation, by the node that finds
// it lost.
const RestartOnLost = recipe.RestartOnLost

// Lost says which node lost a Run and when.
type Lost struct {
	// Node supervised the Run until its lease expired at LeaseExpiredAt.
	Node           string `json:"node"`
	LeaseExpiredAt string `json:"lease_expired_at"`
	// DetectedBy is the node that found the lease expired, at DetectedAt,
	// and marked the Run lost.
	DetectedBy string `json:"detected_by"`
	DetectedAt string `json:"detected_at"`
}

// Leases is the part of store.Cluster a LeaseKeeper uses.
type Leases interface {
	AcquireLease(ctx context.Context, runID, node string, now time.Time, ttl time.Duration) (store.Lease, error)
	RenewLeases(ctx context.Context, node string, now time.Time, ttl time.Duration) ([]store.Lease, error)
	ReleaseLease(ctx context.Context, runID, node string) error
	ExpiredLeases(ctx context.Context, now time.Time) ([]store.Lease, error)
	Lease(ctx context.Context, runID string) (store.Lease, error)
	RestartRun(ctx context.Context, rec store.RunRecord, lostInstance string) error
}

// LeaseConfig configures a LeaseKeeper.
type LeaseConfig struct {
	// Node names this node; it must be unique among the nodes on the
	// store and stay the same across its restarts.
	Node string
	// Leases keeps the leases (the store's Cluster).
	Leases Leases
	// Manager supervises this node's Runs and records lost ones.
	Manager *Manager
	// TTL is the time to live of a lease; DefaultLeaseTTL when zero.
	TTL time.Duration
	// Now is the clock; the Manager's when nil.
	Now func() time.Time
}

// LeaseKeeper keeps one node's Run leases. It is safe for concurrent use.
type LeaseKeeper struct {
	cfg LeaseConfig

	mu   sync.Mutex
	held map[string]bool // Runs whose lease this node holds, as far as it knows
}

// NewLeaseKeeper returns a keeper for cfg.Node.
func NewLeaseKeeper(cfg LeaseConfig) (*LeaseKeeper, error) {
	if cfg.Node == "" || cfg.Leases == nil || cfg.Manager == nil {
		return nil, errors.New("run: LeaseConfig needs Node, Leases and Manager")
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultLeaseTTL
	}
	if err := store.CheckLeaseHolder(cfg.Node, cfg.TTL); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	if cfg.Now == nil {
		cfg.Now = cfg.Manager.now
	}
	return &LeaseKeeper{cfg: cfg, held: map[string]bool{}}, nil
}

// Interval is how often Tick should run: a third of the lease's time to
// live, so two renewals may fail before the lease expires.
func (k *LeaseKeeper) Interval() time.Duration { return k.cfg.TTL / 3 }

// Acquire takes runID's lease for this node, before the node starts it.
// When another node holds it, the error is an *Error with code conflict.
func (k *LeaseKeeper) Acquire(ctx context.Context, runID string) error {
	_, err := k.cfg.Leases.AcquireLease(ctx, runID, k.cfg.Node, k.cfg.Now(), k.cfg.TTL)
	if errors.Is(err, store.ErrConflict) {
		return errorf(CodeConflict, "Run %s is supervised by another node: %v", runID, err)
	}
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.held[runID] = true
	k.mu.Unlock()
	return nil
}

// Release gives up runID's lease once the Run ended. A lease this node no
// longer holds is not an error.
func (k *LeaseKeeper) Release(ctx context.Context, runID string) error {
	k.mu.Lock()
	delete(k.held, runID)
	k.mu.Unlock()
	err := k.cfg.Leases.ReleaseLease(ctx, runID, k.cfg.Node)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrConflict) {
		return nil
	}
	return err
}

// LeaseReport is what one Tick did.
type LeaseReport struct {
	// Renewed lists the Runs whose leases this node renewed.
	Renewed []string
	// Taken lists the Runs this node held until another node took their
	// lease (after this node failed to renew it in time): the node no
	// longer supervises them.
	Taken []string
	// Lost lists the Runs of other nodes this node marked lost.
	Lost []LostRun
	// Released lists the Runs whose expired lease this node took and
	// released because the Run had ended or no longer exists.
	Released []string
	// Errors lists what failed; the rest of the round went on.
	Errors []error
}

// LostRun is a Run a node marked lost.
type LostRun struct {
	// Run is the lost generation, as it was marked.
	Run *Run
	// Restart is set when the Run's Recipe asks for a restart
	// (RestartOnLost): this node started the Run's next generation.
	Restart bool
	// Restarted is that next generation, when it started; when it could
	// not, the report's Errors say why and the Run stays lost.
	Restarted *Run
}

// Tick is one round of lease keeping: it renews every lease this node
// holds, then takes over the expired leases of other nodes and marks
// their Runs lost. Run it every Interval; Keep does.
func (k *LeaseKeeper) Tick(ctx context.Context) (LeaseReport, error) {
	var rep LeaseReport
	now := k.cfg.Now()
	renewed, err := k.cfg.Leases.RenewLeases(ctx, k.cfg.Node, now, k.cfg.TTL)
	if err != nil {
		return rep, fmt.Errorf("run: renew leases: %w", err)
	}
	k.mu.Lock()
	mine := make(map[string]bool, len(renewed))
	for _, l := range renewed {
		mine[l.RunID] = true
		rep.Renewed = append(rep.Renewed, l.RunID)
	}
	for id := range k.held {
		if !mine[id] {
			rep.Taken = append(rep.Taken, id)
		}
	}
	// Leases held under this node's name by an earlier process of it
	// are this node's again.
	k.held = mine
	k.mu.Unlock()
	slices.Sort(rep.Taken)

	expired, err := k.cfg.Leases.ExpiredLeases(ctx, now)
	if err != nil {
		return rep, fmt.Errorf("run: expired leases: %w", err)
	}
	for _, l := range expired {
		if l.Node == k.cfg.Node {
			continue
		}
		k.takeOver(ctx, l, now, &rep)
	}
	// Requests of other nodes whose Signal this node missed.
	if err := k.cfg.Manager.sweepRequests(ctx); err != nil {
		rep.Errors = append(rep.Errors, fmt.Errorf("run: answer Run requests: %w", err))
	}
	return rep, nil
}

// takeOver acquires the expired lease l and marks its Run lost.
func (k *LeaseKeeper) takeOver(ctx context.Context, l store.Lease, now time.Time, rep *LeaseReport) {
	got, err := k.cfg.Leases.AcquireLease(ctx, l.RunID, k.cfg.Node, now, k.cfg.TTL)
	if errors.Is(err, store.ErrConflict) {
		return // another node took it first, or its holder renewed it
	}
	if err != nil {
		rep.Errors = append(rep.Errors, fmt.Errorf("run: take over the lease of Run %s: %w", l.RunID, err))
		return
	}
	from, expiredAt := got.PreviousNode, got.PreviousExpiresAt
	if from == "" {
		// The holder released it between the two reads: nothing was lost.
		from, expiredAt = l.Node, l.ExpiresAt
	}
	lost := Lost{Node: from, LeaseExpiredAt: store.FormatTime(expiredAt), DetectedBy: k.cfg.Node, DetectedAt: store.FormatTime(now)}
	v, restart, err := k.cfg.Manager.markLost(ctx, l.RunID, lost, now)
	switch {
	case errors.Is(err, errNotLost):
		rep.Released = append(rep.Released, l.RunID)
	case err != nil:
		rep.Errors = append(rep.Errors, err)
	default:
		lr := LostRun{Run: v, Restart: restart}
		if restart {
			k.mu.Lock()
			k.held[l.RunID] = true
			k.mu.Unlock()
			next, err := k.cfg.Manager.restartLost(ctx, l.RunID, k.cfg.Node, k.cfg.Leases)
			if err == nil {
				lr.Restarted = next
				rep.Lost = append(rep.Lost, lr)
				return
			}
			rep.Errors = append(rep.Errors, fmt.Errorf("run: restart lost Run %s: %w", l.RunID, err))
			k.mu.Lock()
			delete(k.held, l.RunID)
			k.mu.Unlock()
		}
		rep.Lost = append(rep.Lost, lr)
	}
	if err := k.cfg.Leases.ReleaseLease(ctx, l.RunID, k.cfg.Node); err != nil && !errors.Is(err, store.ErrNotFound) {
		rep.Errors = append(rep.Errors, fmt.Errorf("run: release the lease of Run %s: %w", l.RunID, err))
	}
}

// Keep runs Tick every Interval until ctx ends, handing each report
// (and the error of a round that failed) to report, which may be nil.
func (k *LeaseKeeper) Keep(ctx context.Context, report func(LeaseReport, error)) {
	t := time.NewTicker(k.Interval())
	defer t.Stop()
	for {
		rep, err := k.Tick(ctx)
		if report != nil {
			report(rep, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// errNotLost is markLost's answer for a Run that had already ended or no
// longer exists.
var errNotLost = errors.New("run: not running")

// markLost records that Run id, supervised by lost.Node, is lost: its
// current generation ends at now with status lost, a run.lost Trace event,
// and its run-scoped token revoked. restart reports whether its Recipe
// asks for a restart. A Run that has ended or does not exist gives
// errNotLost.
func (m *Manager) markLost(ctx context.Context, id string, lost Lost, now time.Time) (v *Run, restart bool, err error) {
	unlock := m.lock(id)
	defer unlock()
	r, err := m.st.Run(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, errNotLost
	}
	if err != nil {
		return nil, false, fmt.Errorf("run: mark Run %s lost: %w", id, err)
	}
	if !r.EndedAt.IsZero() || r.Archived {
		return nil, false, errNotLost
	}
	d := decodeDoc(r)
	d.Lost = &lost
	if r.Doc, err = json.Marshal(d); err != nil {
		return nil, false, fmt.Errorf("run: mark Run %s lost: %w", id, err)
	}
	r.Stop, r.EndedAt = string(StatusLost), now
	m.emit(ctx, r, "run.lost", "Run "+id+" lost: node "+lost.Node+" stopped renewing its lease",
		map[string]any{"node": lost.Node, "lease_expired_at": lost.LeaseExpiredAt, "detected_by": lost.DetectedBy}, "error")
	if d.TokenID != "" && m.cfg.Tokens != nil {
		if err := m.cfg.Tokens.RevokeRunToken(ctx, d.TokenID); err != nil {
			m.log.Warn("revoke run token", "run", id, "err", err)
		}
	}
	if err := m.saveRun(ctx, r); err != nil {
		return nil, false, fmt.Errorf("run: mark Run %s lost: %w", id, err)
	}
	restart = wantsRestart(d.Definition)
	if !restart {
		// No generation follows to handle them: its pending Controls end
		// (a restart fails them with its own reason).
		if err := m.failStranded(ctx, r); err != nil {
			m.log.Warn("fail the pending controls of a lost run", "run", id, "err", err)
		}
	}
	return m.view(r), restart, nil
}

// lostRestartReason is the error of the pending Controls of a lost
// generation when its Run restarts.
const lostRestartReason = "the Run's node was lost before the Control was handled; the Run restarted as a new generation"

// restartLost starts the next generation of the lost Run id on node, from
// the Recipe and values of the lost generation, keeping the Run's Control
// journal and Trace. The lost generation's pending Controls fail first.
// A Run with secret values cannot restart: secrets are not stored.
func (m *Manager) restartLost(ctx context.Context, id, node string, leases Leases) (*Run, error) {
	r, err := m.st.Run(ctx, id)
	if err != nil {
		return nil, err
	}
	d := decodeDoc(r)
	rec, err := DecodeRecipe(d.Definition)
	if err != nil {
		return nil, err
	}
	dir := m.stateDir(id)
	vals := make(map[string]string, len(d.Values)+2)
	for k, v := range d.Values {
		if v == redactedMarker {
			return nil, errorf(CodeInvalidRequest, "Run %s was not restarted: its value %s is secret, and secret values are not stored; start it again with its values", id, k)
		}
		vals[k] = v
	}
	vals["run_id"], vals["state_dir"] = id, dir
	script, err := rec.Script(vals)
	if err != nil {
		return nil, fromRecipe(err)
	}
	artifacts, err := rec.ArtifactPaths(vals, dir)
	if err != nil {
		return nil, fromRecipe(err)
	}
	cs, err := m.st.Controls(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		if store.ControlPending(c.Status) {
			if _, err := m.st.TransitionControl(ctx, id, c.ID, store.ControlFailed, nil, lostRestartReason, m.now()); err != nil && !errors.Is(err, store.ErrConflict) {
				return nil, err
			}
		}
	}
	req := SpawnRequest{Recipe: d.Recipe, Tool: d.Tool, LaunchKind: d.LaunchKind}
	v, _, err := m.spawnLocked(ctx, r.OwnerID, id, req, rec, d.Definition, spawnPlan{vals: vals, script: script, shownScript: script,
		env: rec.Environment(vals), artifacts: artifacts, dir: dir, node: node, restart: leases.RestartRun, secrets: secretValues(vals, maskSecrets(vals, rec.SecretArgs(), nil))})
	return v, err
}

// wantsRestart reports whether a Recipe definition asks for a restart when
// its Run is lost: its "restart" field is RestartOnLost.
func wantsRestart(def json.RawMessage) bool {
	var r struct {
		Restart string `json:"restart"`
	}
	return json.Unmarshal(def, &r) == nil && r.Restart == RestartOnLost
}
