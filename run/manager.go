package run

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/assent-run/assent/internal/keylock"
	"github.com/assent-run/assent/run/recipe"
	"github.com/assent-run/assent/store"
)

// TokenIssuer mints the run-scoped token a Run's service uses to claim and
// settle its Controls and append Trace (ASSENT_RUN_TOKEN). The token acts
// for the Run's owner and only for that Run's generation.
//
// A token is revoked when its generation ends.
type TokenIssuer interface {
	// IssueRunToken returns a token and the id under which it can be
	// revoked.
	IssueRunToken(ctx context.Context, ownerID, runID, instanceID string) (token, tokenID string, err error)
	// RevokeRunToken revokes the token with tokenID.
	RevokeRunToken(ctx context.Context, tokenID string) error
}

// Config configures a Manager.
type Config struct {
	// Store keeps Runs, Control journals, Traces and registered tools.
	Store store.Runs
	// DataDir holds runs/<id>/ (logs, FIFO, artifacts) and recipes/.
	DataDir string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Logger receives supervision problems; slog.Default when nil.
	Logger *slog.Logger
	// Tokens mints run-scoped tokens; without it ASSENT_RUN_TOKEN is empty.
	Tokens TokenIssuer
	// URL is given to services as ASSENT_URL.
	URL string
	// Version is reported by the runtime status view.
	Version string
	// PollInterval is how often a re-adopted Run (one this process did not
	// start) is checked for exit; 500ms when zero.
	PollInterval time.Duration
	// RunUser is whom Run and tool processes run as when the server runs
	// as root. A uid range "FIRST-LAST" gives each Run generation and each
	// tool process its own uid from the range, with the same gid and no
	// supplementary groups, so Runs cannot reach each other; empty means
	// DefaultRunUIDs (on Linux; elsewhere "nobody" when that user exists).
	// A user name or numeric "uid:gid" runs every process as that one
	// user, so they can reach each other's processes and, while they run,
	// Run directories; a user with uid 0 keeps root. When the server is
	// not root it is ignored.
	RunUser string
	// StartGrace is how long Spawn waits for a new process to exit before
	// answering, so a Run that cannot start answers failed, not running;
	// DefaultStartGrace when zero, no wait when negative.
	StartGrace time.Duration
	// Node names this node when several nodes share the store: Runs
	// started here record it, and a Run another node supervises is not
	// this node's to reconcile. It must be unique among the nodes and
	// stay the same across restarts of this node.
	Node string
	// Leases, when set, makes this node take a lease on each Run it
	// starts, renewed by the Manager's LeaseKeeper (see LeaseKeeper), so
	// that another node finds the Run lost if this one dies. It needs
	// Node.
	Leases Leases
	// LeaseTTL is the time to live of a lease; DefaultLeaseTTL when zero.
	LeaseTTL time.Duration
	// Notify, when set, is told of changes so live views can refresh:
	// kind "run.trace" after Trace appends, "run.status" after a Run
	// starts, ends, is killed, archived or pruned, and "run.control" after
	// a Control changes. It must not block.
	Notify func(ownerID, runID, kind string)
	// Signal, when set, carries a Signal to the node it names, for
	// example as an event on the bus the nodes share; that node hands it
	// to its Manager's HandleSignal. With it, a Control, kill or logs
	// request for a Run another node supervises is passed to that node
	// through the store (see HandleSignal); without it such a request is
	// refused as one whose process is not on this node. It must not
	// block, and must not make the Signal visible to anyone who may not
	// see the Run (ownerID is the Run's owner).
	Signal func(ownerID string, s Signal)
	// ForwardWait bounds how long a request passed to another node waits
	// for that node's answer; DefaultForwardWait when zero.
	ForwardWait time.Duration
	// Network is the network Run and tool processes get: NetworkIsolated
	// (the default when empty) gives each a network namespace of its own
	// with loopback only, from which a Run reaches the server through the
	// run API alone (serve it with ServeRunAPI); NetworkHost lets them
	// share the server's network.
	Network string
}

// Manager starts, supervises, steers and retires Runs. It is safe for
// concurrent use. Runs outlive the Manager: New re-adopts the live ones.
type Manager struct {
	cfg   Config
	runAs *runAs
	// uids hands out the uids of a ranged runAs.
	uids *uidPool
	// iso starts processes in namespaces of their own; nil when they
	// cannot (isoWhy says why).
	iso    *isolation
	isoWhy string
	// netWhy says why processes share the server's network although
	// Config.Network asked for a network of their own.
	netWhy string
	// api is the socket of the run API; nil when processes share the
	// server's network.
	api    *runAPI
	st     store.Runs
	now    func() time.Time
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// closed is set by Close; after it no process end is recorded.
	closed bool
	// starting holds the Run instances (generations) this Manager has
	// claimed in the store and whose process it is starting: until the
	// process's pid is recorded, they read running, not exited.
	starting map[string]bool
	// children maps the Run instances whose process this Manager started
	// and has not yet reaped to that process's identity: such a process
	// is alive, or has just exited and is about to be recorded, and its
	// pid cannot have been given to another process.
	children map[string]child
	// locks holds a lock for each Run in use; an entry goes when its last
	// holder or waiter lets go.
	locks keylock.Map
	// waiting counts the goroutines waiting on processes this Manager
	// started.
	waiting sync.WaitGroup
	// heads caches who owns each Run and its current generation for the
	// hot paths (Trace appends); every write of a Run through the Manager
	// drops its entry.
	heads map[string]runHead

	traces   *group[store.TraceAppend]
	controls *group[store.ControlAdmission]

	// keeper keeps this node's Run leases when Config.Leases is set.
	keeper *LeaseKeeper

	// asking counts, per Run, the requests this node waits on another
	// node to answer (see request).
	asking map[string]int
}

// New returns a Manager and reconciles every Run in the store: a Run whose
// recorded process is alive and verified is re-adopted; one whose process
// is gone is finished (exited, unless its exit code was recorded).
func New(ctx context.Context, cfg Config) (*Manager, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	if cfg.Store == nil || cfg.DataDir == "" {
		return nil, errors.New("run: Config needs Store and DataDir")
	}
	// Every path handed to a Run is absolute: its process runs in its own
	// directory, where a relative data directory would point elsewhere.
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("run: data directory: %w", err)
	}
	cfg.DataDir = abs
	if cfg.StartGrace == 0 {
		cfg.StartGrace = DefaultStartGrace
	}
	if err := checkNetwork(cfg.Network); err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, st: cfg.Store, now: cfg.Now, log: cfg.Logger, heads: map[string]runHead{}, asking: map[string]int{}}
	if m.now == nil {
		m.now = time.Now
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	if m.runAs, err = resolveRunUser(cfg.RunUser); err != nil {
		return nil, err
	}
	switch {
	case m.runAs == nil && os.Geteuid() == 0:
		m.log.Warn("Runs and tools run as root: no unprivileged run user (create user nobody or set the run user)")
	case m.runAs != nil && m.runAs.ranged:
		m.uids = newUIDPool(m.runAs.first, m.runAs.last)
		if n := len(m.uids.reserved) - 2; n > 0 {
			m.log.Info("uids of the Run range named in passwd or group are skipped", "run_uids", m.runAs.name, "skipped", n)
		}
	case m.runAs != nil && m.runAs.fellBack:
		m.log.Warn("the uids that give each Run and tool process its own user ("+DefaultRunUIDs+") are not mapped in this user namespace, so every one runs as the one run user: they can read each other's environment (run tokens included), signal each other and reach each other's Run directories while they run; map a uid range into the namespace and pass it as --run-uids",
			"run_user", m.runAs.name)
	case m.runAs != nil:
		m.log.Warn("every Run and tool process runs as the one run user: they can read each other's environment (run tokens included), signal each other and reach each other's Run directories while they run; leave the run user unset to give each its own uid",
			"run_user", m.runAs.name)
	}
	if m.cfg.PollInterval <= 0 {
		m.cfg.PollInterval = 500 * time.Millisecond
	}
	m.traces = &group[store.TraceAppend]{run: func(items []store.TraceAppend) ([]error, error) {
		return m.st.AppendTraces(context.Background(), items)
	}}
	m.controls = &group[store.ControlAdmission]{run: func(items []store.ControlAdmission) ([]error, error) {
		return m.st.AdmitControls(context.Background(), items)
	}}
	if err := m.prepareDirs(); err != nil {
		return nil, err
	}
	m.setupIsolation()
	m.ctx, m.cancel = context.WithCancel(context.Background())
	if cfg.Leases != nil {
		if m.keeper, err = NewLeaseKeeper(LeaseConfig{Node: cfg.Node, Leases: cfg.Leases, Manager: m, TTL: cfg.LeaseTTL}); err != nil {
			m.Close()
			return nil, err
		}
	}
	if err := m.reconcile(ctx); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// LeaseKeeper returns the keeper of this node's Run leases, or nil when
// the Manager was configured without Leases. Run its Keep while the
// Manager supervises.
func (m *Manager) LeaseKeeper() *LeaseKeeper { return m.keeper }

// Node returns this node's name (Config.Node).
func (m *Manager) Node() string { return m.cfg.Node }

// Close stops supervising Runs. Runs keep running; a later Manager
// re-adopts them and records the end of any that exited meanwhile. Once
// Close returns the Manager writes nothing more to the store, so the store
// may be closed: an end of a process noticed later is left to the next
// Manager.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	if m.api != nil {
		m.api.close()
	}
}

// enter registers a supervision task that writes to the store, so Close
// waits for it. It reports false once the Manager is closed; otherwise the
// caller must call m.wg.Done when the task ends.
func (m *Manager) enter() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.wg.Add(1)
	return true
}

func (m *Manager) runsDir() string           { return filepath.Join(m.cfg.DataDir, "runs") }
func (m *Manager) recipesDir() string        { return filepath.Join(m.cfg.DataDir, "recipes") }
func (m *Manager) stateDir(id string) string { return filepath.Join(m.runsDir(), id) }

// lock takes Run id's lock, which serializes the changes of one Run, and
// returns its release.
func (m *Manager) lock(id string) func() {
	// Without an end to the wait, Lock cannot fail.
	unlock, _ := m.locks.Lock(context.Background(), id)
	return unlock
}

type runHead struct {
	owner, instance string
	archived        bool
}

func (m *Manager) forget(id string) {
	m.mu.Lock()
	delete(m.heads, id)
	m.mu.Unlock()
}

// head returns the owner and generation of Run id, from the cache when
// possible.
func (m *Manager) head(ctx context.Context, id string) (runHead, error) {
	m.mu.Lock()
	h, ok := m.heads[id]
	m.mu.Unlock()
	if ok {
		return h, nil
	}
	r, err := m.st.Run(ctx, id)
	if err != nil {
		return h, err
	}
	h = runHead{r.OwnerID, r.InstanceID, r.Archived}
	m.mu.Lock()
	m.heads[id] = h
	m.mu.Unlock()
	return h, nil
}

// saveRun writes r and drops its cached head.
func (m *Manager) saveRun(ctx context.Context, r store.RunRecord) error {
	defer m.forget(r.ID)
	if err := m.st.SaveRun(ctx, r); err != nil {
		return err
	}
	m.notify(r.OwnerID, r.ID, "run.status")
	return nil
}

func (m *Manager) notify(ownerID, runID, kind string) {
	if m.cfg.Notify != nil {
		m.cfg.Notify(ownerID, runID, kind)
	}
}

// runDoc is what package run keeps in store.RunRecord.Doc.
type runDoc struct {
	Recipe     string              `json:"recipe,omitempty"`
	Tool       string              `json:"tool,omitempty"`
	LaunchKind string              `json:"launch_kind"`
	Definition json.RawMessage     `json:"definition"`
	Values     map[string]string   `json:"values"`
	Script     string              `json:"script"`
	Control    []string            `json:"control"`
	Artifacts  map[string]Artifact `json:"artifacts,omitempty"`
	Singleton  bool                `json:"singleton,omitempty"`
	FIFO       string              `json:"fifo,omitempty"`
	TokenID    string              `json:"token_id,omitempty"`
	Lost       *Lost               `json:"lost,omitempty"`
	// Node names the node that started this generation.
	Node string `json:"node,omitempty"`
}

func decodeDoc(rec store.RunRecord) runDoc {
	var d runDoc
	_ = json.Unmarshal(rec.Doc, &d)
	return d
}

// SpawnRequest asks for a new Run (or a new generation of a terminal one).
type SpawnRequest struct {
	// Recipe names <data>/recipes/<stem>.json; Template is an inline
	// command template. Exactly one is needed.
	Recipe   string
	Template json.RawMessage
	// Definition, when set, is a whole Recipe to run (registered tools).
	Definition *Recipe
	Values     map[string]json.RawMessage
	// Reason is why the caller asks, shown to the person who decides
	// when the spawn waits for approval.
	Reason string
	// DeadlineSeconds, when positive, is how long the spawn waits for
	// approval before it is declined; otherwise the ToolSet's default.
	DeadlineSeconds int64
	// EscalateTo, when set, is the group the proposal is routed to at its
	// deadline; it then has as long again before it is declined.
	EscalateTo string
	// RunID is the Run id; "run-<epoch ms>" when empty.
	RunID string
	// Artifacts adds or replaces declared artifacts.
	Artifacts map[string]Artifact
	// LaunchKind is "spawn" (default) or "tool"; Tool names the tool.
	LaunchKind string
	Tool       string
	// Secret names values that are secret besides the Recipe's "!secret"
	// arguments and secret-looking names: they are masked in every view
	// and stored document, and only the process receives them.
	Secret []string
}

// DefaultStartGrace is how long Spawn waits, at most, for a new process to
// exit before it answers.
const DefaultStartGrace = 300 * time.Millisecond

// Bounds of what the views show of a Run's logs.
const (
	stderrHeadLines = 10
	stderrHeadBytes = 2 << 10
	logLineMaxBytes = 4 << 10
)

// DataDir returns the absolute data directory.
func (m *Manager) DataDir() string { return m.cfg.DataDir }

// LoadRecipe reads <data>/recipes/<stem>.json.
func (m *Manager) LoadRecipe(stem string) (*Recipe, json.RawMessage, error) {
	stem = strings.TrimSuffix(strings.TrimSpace(stem), ".json")
	if !recipeStemPattern.MatchString(stem) {
		return nil, nil, errorf(CodeInvalidRequest, "Recipe reference must be a file stem of %s (letters, digits, '.', '_', '-'): %q", m.recipesDir(), stem)
	}
	p := filepath.Join(m.recipesDir(), stem+".json")
	fi, err := os.Stat(p)
	if err != nil {
		return nil, nil, errorf(CodeNotFound, "Recipe reference not found: %s. Put %s.json in %s or pass an inline template.", stem, stem, m.recipesDir())
	}
	if fi.Size() > 1<<20 {
		return nil, nil, errorf(CodeInvalidRecipe, "Recipe file %s is over 1 MiB", stem)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, nil, fmt.Errorf("run: read recipe: %w", err)
	}
	r, err := DecodeRecipe(b)
	if err != nil {
		return nil, nil, err
	}
	return r, b, nil
}

var (
	recipeStemPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)
	unsafeNameChars   = regexp.MustCompile(`[^A-Za-z0-9_.-]`)
)

// Spawn validates req, claims the Run id for ownerID and starts a new
// generation. A live generation of the same id refuses reuse (run_active);
// a terminal one is replaced in the same directory, keeping its files.
func (m *Manager) Spawn(ctx context.Context, ownerID string, req SpawnRequest) (*Run, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	var rec *Recipe
	var def json.RawMessage
	var err error
	switch {
	case req.Definition != nil:
		rec = req.Definition
		def, _ = json.Marshal(rec)
	case req.Recipe != "" && len(req.Template) > 0:
		return nil, errorf(CodeInvalidRequest, "spawn takes recipe or template, not both.")
	case req.Recipe != "":
		rec, def, err = m.LoadRecipe(req.Recipe)
	case len(req.Template) > 0:
		def, _ = json.Marshal(map[string]json.RawMessage{"template": req.Template})
		rec, err = DecodeRecipe(def)
	default:
		return nil, errorf(CodeInvalidRequest, "spawn requires file or template.")
	}
	if err != nil {
		return nil, err
	}
	id := req.RunID
	if rec.Singleton {
		// A singleton has one identity: its Recipe's stem (or its tool's
		// name), whatever the caller asks.
		single := strings.TrimSuffix(req.Recipe, ".json")
		if single == "" {
			single = req.Tool
		}
		if single != "" {
			if id != "" && id != single {
				return nil, errorf(CodeInvalidRequest, "singleton Recipe run identity is run:%s; received run:%s", single, id)
			}
			id = single
		}
	}
	if id == "" {
		id = "run-" + strconv.FormatInt(m.now().UnixMilli(), 10)
	}
	if err := ValidRunID(id); err != nil {
		return nil, err
	}
	vals, err := rec.Resolve(req.Values)
	if err != nil {
		return nil, fromRecipe(err)
	}
	dir := m.stateDir(id)
	vals["run_id"] = id
	vals["state_dir"] = dir
	script, err := rec.Script(vals)
	if err != nil {
		return nil, fromRecipe(err)
	}
	artifacts, err := rec.ArtifactPaths(vals, dir)
	if err != nil {
		return nil, fromRecipe(err)
	}
	for _, name := range slices.Sorted(maps.Keys(req.Artifacts)) {
		a := req.Artifacts[name]
		if a.Path, err = ConfinePath(dir, recipe.Expand(a.Path, vals)); err != nil {
			return nil, errorf(CodeInvalidRequest, "artifact %s: %s", name, err.(*Error).Message)
		}
		artifacts[name] = a
	}
	// What is stored and shown: secret values masked, also in the script.
	shown := maskSecrets(vals, rec.SecretArgs(), req.Secret)
	shownScript, err := rec.Script(shown)
	if err != nil {
		shownScript = ""
	}
	env := rec.Environment(vals)
	v, done, err := m.spawnLocked(ctx, ownerID, id, req, rec, def, spawnPlan{vals: shown, script: script, shownScript: shownScript, env: env, artifacts: artifacts, dir: dir, node: m.cfg.Node,
		secrets: secretValues(vals, shown)})
	if err != nil || done == nil {
		return v, err
	}
	// A process that cannot start, or exits at once, answers with its
	// final status and the head of its stderr, never running.
	if m.cfg.StartGrace > 0 {
		t := time.NewTimer(m.cfg.StartGrace)
		select {
		case <-done:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	if r, err := m.st.Run(ctx, id); err == nil && r.InstanceID == v.InstanceID {
		return m.view(r), nil
	}
	return v, nil
}

// spawnPlan is what Spawn resolved before claiming the id.
type spawnPlan struct {
	vals map[string]string // as stored: secrets masked
	// secrets are the values masked in the process's output.
	secrets             []string
	script, shownScript string
	env                 []string
	artifacts           map[string]Artifact
	dir                 string
	// node supervises the new generation: this node, unless a lease
	// keeper restarts a lost Run under its own name.
	node string
	// restart, when set, claims the new generation in place of the
	// ended one keeping the Run's Control journal and Trace
	// (store.Cluster.RestartRun).
	restart func(ctx context.Context, rec store.RunRecord, lostInstance string) error
}

// secretValues returns the values of vals that shown masks.
func secretValues(vals, shown map[string]string) []string {
	var out []string
	for k, v := range vals {
		if shown[k] == redactedMarker && v != redactedMarker {
			out = append(out, v)
		}
	}
	return out
}

// maskSecrets returns vals with the secret ones masked: declared secret
// arguments, names in extra, and names that look secret (SecretKey).
func maskSecrets(vals map[string]string, declared, extra []string) map[string]string {
	secret := map[string]bool{}
	for _, n := range declared {
		secret[n] = true
	}
	for _, n := range extra {
		secret[n] = true
	}
	out := make(map[string]string, len(vals))
	for k, v := range vals {
		if secret[k] || SecretKey(k) {
			v = redactedMarker
		}
		out[k] = v
	}
	return out
}

// spawnLocked claims id and starts the generation under the Run's lock. It
// returns the Run's view and, when a process was started, a channel closed
// once its end is recorded.
func (m *Manager) spawnLocked(ctx context.Context, ownerID, id string, req SpawnRequest, rec *Recipe, def json.RawMessage, p spawnPlan) (*Run, <-chan struct{}, error) {
	unlock := m.lock(id)
	defer unlock()
	old, err := m.st.Run(ctx, id)
	replace := ""
	gen := 1
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, nil, err
	default:
		// An id held by another principal answers exactly as an id lost to
		// a concurrent claim: nothing about that Run (its status, whether
		// it is archived) shows.
		if old.OwnerID != ownerID {
			return nil, nil, errorf(CodeConflict, "Run id %s is not available; choose another id.", id)
		}
		if old.Archived {
			return nil, nil, errorf(CodeRunArchived, "Run %s is archived; prune it or choose another id.", id)
		}
		if s, _ := m.status(old); s == StatusRunning {
			if rec.Singleton {
				if !singletonCompatible(decodeDoc(old), rec, req, p.vals) {
					return nil, nil, errorf(CodeRunActive, "Active singleton Run %s has incompatible Recipe identity, owner, startup values, or Control contract. Stop it before changing singleton configuration.", id)
				}
				v := m.view(old)
				v.Reused = true
				return v, nil, nil
			}
			return nil, nil, errorf(CodeRunActive, "Run state already has an active owned process: %s. Stop it before reusing the same run_id.", id)
		}
		replace, gen = old.InstanceID, old.Generation+1
	}
	if p.restart != nil && replace == "" {
		return nil, nil, errorf(CodeNotFound, "Run %s has no ended generation to restart", id)
	}
	// The lease comes first: of two nodes starting the same id, the one
	// that does not get it starts nothing.
	if m.keeper != nil {
		if err := m.keeper.Acquire(ctx, id); err != nil {
			return nil, nil, err
		}
	}
	v, done, err := m.startGeneration(ctx, ownerID, id, req, rec, def, p, old, replace, gen)
	if err != nil && m.keeper != nil {
		if rerr := m.keeper.Release(context.WithoutCancel(ctx), id); rerr != nil {
			m.log.Warn("release run lease", "run", id, "err", rerr)
		}
	}
	return v, done, err
}

// startGeneration claims generation gen of Run id (replacing generation
// replace of old, when set) and starts its process. The caller holds the
// Run's lock and, with several nodes, its lease.
func (m *Manager) startGeneration(ctx context.Context, ownerID, id string, req SpawnRequest, rec *Recipe, def json.RawMessage, p spawnPlan, old store.RunRecord, replace string, gen int) (*Run, <-chan struct{}, error) {
	dir := p.dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("run: %w", err)
	}
	// The directory is the server's while it prepares the generation,
	// whoever ran in it before, so nothing planted there can redirect
	// what it creates.
	if err := m.reclaim(dir); err != nil {
		return nil, nil, errorf(CodeSandbox, "Run %s: its directory cannot be taken back from its earlier run user: %v. Prune the Run or choose another id.", id, err)
	}
	// Generation-local files go; actor files and artifacts stay.
	for _, f := range []string{"stdout.log", "stderr.log", "exit", "exit.tmp", "archive-tombstone.json"} {
		os.RemoveAll(filepath.Join(dir, f))
	}
	if matches, _ := filepath.Glob(filepath.Join(dir, "control-*.fifo")); len(matches) > 0 {
		for _, f := range matches {
			os.RemoveAll(f)
		}
	}
	instance := uuid.NewString()
	fifo := filepath.Join(dir, "control-"+instance[:8]+".fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		return nil, nil, fmt.Errorf("run: create control FIFO: %w", err)
	}
	who, err := m.takeIdentity()
	if err != nil {
		return nil, nil, err
	}
	started := false
	defer func() {
		if !started {
			m.retire(dir, who)
		}
	}()
	if err := m.handOverTree(dir, who); err != nil {
		return nil, nil, errorf(CodeSandbox, "Run %s: its directory cannot be given to its run user: %v", id, err)
	}
	now := m.now()
	doc := runDoc{Recipe: strings.TrimSuffix(req.Recipe, ".json"), Tool: req.Tool, LaunchKind: req.LaunchKind, Definition: def,
		Values: p.vals, Script: p.shownScript, Control: rec.Control, Artifacts: p.artifacts, Singleton: rec.Singleton, FIFO: fifo, Node: p.node}
	if doc.LaunchKind == "" {
		doc.LaunchKind = "spawn"
	}
	docJSON, _ := json.Marshal(doc)
	r := store.RunRecord{ID: id, OwnerID: ownerID, InstanceID: instance, Generation: gen, CreatedAt: now, StartedAt: now, Doc: docJSON}
	if replace != "" {
		r.CreatedAt = old.CreatedAt
	}
	defer m.forget(id)
	claim := m.st.ClaimRun
	if p.restart != nil {
		claim = p.restart
	}
	if err := claim(ctx, r, replace); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, nil, errorf(CodeConflict, "Run id %s is not available; choose another id.", id)
		}
		return nil, nil, err
	}
	m.setStarting(instance, true)
	defer m.setStarting(instance, false)
	done, err := m.start(ctx, &r, doc, p.script, p.env, p.secrets, dir, who)
	started = err == nil
	if err != nil {
		code := 127
		r.ExitCode, r.EndedAt = &code, m.now()
		_ = m.saveRun(ctx, r)
		m.emit(ctx, r, "run.failed", "Run "+id+" failed to start", map[string]any{"error": err.Error()}, "error")
		m.releaseLease(id)
		return nil, nil, errorf(CodeStartFailed, "Run %s could not start: %v. Its status is failed; fix the cause and spawn it again.", id, err)
	}
	return m.view(r), done, nil
}

// singletonCompatible reports whether a live singleton generation can
// serve a new launch: same Recipe, singleton, same startup values and the
// same Control contract (the owner was checked before).
func singletonCompatible(old runDoc, rec *Recipe, req SpawnRequest, vals map[string]string) bool {
	if !old.Singleton || old.Recipe != strings.TrimSuffix(req.Recipe, ".json") || old.Tool != req.Tool {
		return false
	}
	return slices.Equal(old.Control, rec.Control) && maps.Equal(old.Values, vals)
}

// wrapper runs the compiled script and records its exit code in a file,
// so the code survives a restart of the supervisor.
const wrapper = `/bin/sh -c "$1"; c=$?; printf '%s\n' "$c" > "$2.tmp" && mv -f "$2.tmp" "$2"; exit $c`

// start runs script as generation r in dir, sandboxed (see
// sandboxCommand) as who, with the Recipe's env and the ASSENT_*
// variables. The returned channel is closed once the process's end is
// recorded and who is given back.
func (m *Manager) start(ctx context.Context, r *store.RunRecord, doc runDoc, script string, recipeEnv, secrets []string, dir string, who *identity) (<-chan struct{}, error) {
	// New files only: whatever stood at these names was removed.
	const logFlags = os.O_CREATE | os.O_EXCL | os.O_WRONLY | os.O_APPEND | syscall.O_NOFOLLOW
	stdout, err := os.OpenFile(filepath.Join(dir, "stdout.log"), logFlags, 0o600)
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	stderr, err := os.OpenFile(filepath.Join(dir, "stderr.log"), logFlags, 0o600)
	if err != nil {
		return nil, err
	}
	defer stderr.Close()
	token := ""
	if m.cfg.Tokens != nil {
		if token, doc.TokenID, err = m.cfg.Tokens.IssueRunToken(ctx, r.OwnerID, r.ID, r.InstanceID); err != nil {
			return nil, fmt.Errorf("issue run token: %w", err)
		}
		r.Doc, _ = json.Marshal(doc)
	}
	env := append(recipeEnv, "ASSENT_URL="+m.runURL(), "ASSENT_RUN_TOKEN="+token, "ASSENT_RUN_ID="+r.ID,
		"ASSENT_RUN_INSTANCE_ID="+r.InstanceID, "ASSENT_CONTROL_FIFO="+doc.FIFO, "ASSENT_STATE_DIR="+dir)
	var relay *maskRelay
	if m.iso != nil {
		// The init masks these, the run token and bearer tokens in what
		// the process writes to its logs.
		env = append(env, maskEnv+"="+encodeMask(append(secrets, token)))
	} else if relay, err = startMaskRelay(stdout, stderr, append(secrets, token)); err != nil {
		// Without an init, a relay process masks them; a Run whose
		// output could not be masked does not start.
		return nil, fmt.Errorf("start the relay that masks the Run's output: %w", err)
	}
	cmd := m.sandboxCommand(context.Background(), who, dir, env, true, "/bin/sh", "-c", wrapper, "assent-run", script, filepath.Join(dir, "exit"))
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if relay != nil {
		cmd.Stdout, cmd.Stderr = relay.stdout, relay.stderr
	}
	err = cmd.Start()
	if relay != nil {
		// The process holds the write ends now; the relay ends once it
		// and whatever it left behind closed them.
		relay.stdout.Close()
		relay.stderr.Close()
	}
	if err != nil {
		return nil, err
	}
	r.PID = cmd.Process.Pid
	if start, _, err := procStartTime(r.PID); err == nil {
		r.StartTime = start
	}
	m.setChild(r.InstanceID, child{pid: r.PID, start: r.StartTime})
	if err := m.saveRun(ctx, *r); err != nil {
		m.log.Error("record run process", "run", r.ID, "err", err)
	}
	m.emit(ctx, *r, "run.start", "Run "+r.ID+" started", map[string]any{"pid": r.PID, "run_instance_id": r.InstanceID}, "")
	id, instance := r.ID, r.InstanceID
	done := make(chan struct{})
	m.waiting.Add(1)
	go func() {
		defer m.waiting.Done()
		defer close(done)
		_ = cmd.Wait()
		m.setChild(instance, child{})
		if relay != nil {
			// The last of the output reaches the logs before the end is
			// recorded.
			relay.wait()
		}
		// Once finish took the Run directory back, the uid may go to
		// another process (a closed Manager gives none).
		defer m.releaseIdentity(who)
		// After Close the end is left to the next Manager, which finds it
		// from the exit file.
		if m.enter() {
			defer m.wg.Done()
			m.finish(id, instance)
		}
	}()
	return done, nil
}

// finish records the end of generation instance of Run id: its exit code
// when the wrapper wrote one, and the matching lifecycle Trace event. It
// takes the Run directory back from the generation's user first, so that
// no later process given the same uid can reach it.
func (m *Manager) finish(id, instance string) {
	ctx := context.Background()
	unlock := m.lock(id)
	defer unlock()
	r, err := m.st.Run(ctx, id)
	if err != nil || r.InstanceID != instance {
		return
	}
	if !r.Archived {
		if err := m.reclaim(m.stateDir(id)); err != nil {
			m.log.Warn("take back the Run directory from its run user", "run", id, "err", err)
		}
	}
	if r.ExitCode != nil || !r.EndedAt.IsZero() {
		return
	}
	r.ExitCode = m.exitFile(id)
	r.EndedAt = m.now()
	// The lifecycle event goes first, so a reader that sees the end
	// recorded also sees its Trace.
	switch {
	case r.Stop != "":
	case r.ExitCode == nil:
		m.emit(ctx, r, "run.exited", "Run "+id+" exited without a result", nil, "warning")
	case *r.ExitCode == 0:
		m.emit(ctx, r, "run.done", "Run "+id+" done", map[string]any{"code": 0}, "")
	default:
		m.emit(ctx, r, "run.failed", "Run "+id+" failed with code "+strconv.Itoa(*r.ExitCode), map[string]any{"code": *r.ExitCode}, "error")
	}
	if d := decodeDoc(r); d.TokenID != "" && m.cfg.Tokens != nil {
		if err := m.cfg.Tokens.RevokeRunToken(ctx, d.TokenID); err != nil {
			m.log.Warn("revoke run token", "run", id, "err", err)
		}
	}
	if err := m.saveRun(ctx, r); err != nil {
		m.log.Error("record run exit", "run", id, "err", err)
		return
	}
	if err := m.failStranded(ctx, r); err != nil {
		m.log.Warn("fail the pending controls of an ended run", "run", id, "err", err)
	}
	m.releaseLease(id)
}

// releaseLease gives up this node's lease of Run id once its generation
// ended, when the Manager keeps leases.
func (m *Manager) releaseLease(id string) {
	if m.keeper == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.keeper.Release(ctx, id); err != nil {
		m.log.Warn("release run lease", "run", id, "err", err)
	}
}

// exitFile returns the exit code the wrapper recorded for Run id, if any.
func (m *Manager) exitFile(id string) *int {
	dir := m.stateDir(id)
	b, err := readRunFile(dir, filepath.Join(dir, "exit"), 32)
	if err != nil {
		return nil
	}
	c, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return nil
	}
	return &c
}

func (m *Manager) reconcile(ctx context.Context) error {
	runs, err := m.st.ListRuns(ctx, "")
	if err != nil {
		return fmt.Errorf("run: reconcile: %w", err)
	}
	for _, r := range runs {
		if r.Archived {
			continue
		}
		if !r.EndedAt.IsZero() {
			// Controls a stop of this node left pending on a Run that
			// ended meanwhile end now, instead of waiting forever.
			if !m.otherNode(r) {
				if err := m.failStranded(ctx, r); err != nil {
					m.log.Warn("fail the pending controls of an ended run", "run", r.ID, "err", err)
				}
			}
			continue
		}
		if m.keeper != nil {
			// A Run whose lease another node holds is that node's, even
			// when its process can be seen from here; once that lease
			// expires, the lease keeper finds the Run lost. A Run without
			// a lease (started before leases) becomes this node's.
			l, err := m.cfg.Leases.Lease(ctx, r.ID)
			switch {
			case err == nil && l.Node != m.cfg.Node:
				continue
			case err != nil && !errors.Is(err, store.ErrNotFound):
				return fmt.Errorf("run: reconcile: %w", err)
			case err != nil:
				if err := m.keeper.Acquire(ctx, r.ID); err != nil {
					continue // another node took it meanwhile
				}
			}
		}
		if verifyProcess(r.PID, r.StartTime) == identityValid {
			var who *identity
			if uid, ok := processUID(r.PID); ok && m.uids != nil && m.uids.contains(uid) {
				// The process keeps its uid; none is given to another
				// until its directory is taken back.
				m.uids.hold(uid)
				who = &identity{uid: uid, gid: uid, pooled: true}
			}
			m.adopt(r.ID, r.InstanceID, r.PID, r.StartTime, who)
			if err := m.failStranded(ctx, r); err != nil {
				m.log.Warn("fail the controls of earlier generations", "run", r.ID, "err", err)
			}
			// Controls other nodes queued while this node was away, and
			// those a stop of this node left queued before delivery.
			if err := m.deliverQueued(ctx, r.ID); err != nil {
				m.log.Warn("deliver queued controls", "run", r.ID, "err", err)
			}
			continue
		}
		m.finish(r.ID, r.InstanceID)
	}
	if err := m.sweepRequests(ctx); err != nil {
		m.log.Warn("answer run requests", "err", err)
	}
	return nil
}

// adopt watches a live process this Manager did not start, running as
// who, which it gives back once the process ended.
func (m *Manager) adopt(id, instance string, pid int, start string, who *identity) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer m.releaseIdentity(who)
		t := time.NewTicker(m.cfg.PollInterval)
		defer t.Stop()
		for {
			select {
			case <-m.ctx.Done():
				return
			case <-t.C:
				if verifyProcess(pid, start) != identityValid {
					m.finish(id, instance)
					return
				}
			}
		}
	}()
}

// setStarting records whether this Manager is starting the process of
// Run instance (generation) instance.
func (m *Manager) setStarting(instance string, on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !on {
		delete(m.starting, instance)
		return
	}
	if m.starting == nil {
		m.starting = make(map[string]bool)
	}
	m.starting[instance] = true
}

// child is the identity of a process a Manager started: its pid and its
// start time as recorded with the Run.
type child struct {
	pid   int
	start string
}

// setChild records c as the unreaped process this Manager started for
// Run instance instance, or forgets it when c is zero.
func (m *Manager) setChild(instance string, c child) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.pid == 0 {
		delete(m.children, instance)
		return
	}
	if m.children == nil {
		m.children = make(map[string]child)
	}
	m.children[instance] = c
}

// isChild reports whether r records, as its current generation's
// process, the unreaped process this Manager started for it.
func (m *Manager) isChild(r store.RunRecord) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.children[r.InstanceID]
	return ok && r.PID > 0 && c.pid == r.PID && c.start != "" && c.start == r.StartTime
}

// isStarting reports whether this Manager is starting the process of Run
// instance instance.
func (m *Manager) isStarting(instance string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.starting[instance]
}

// otherNode reports whether another node started r's current generation.
func (m *Manager) otherNode(r store.RunRecord) bool {
	var d struct {
		Node string `json:"node"`
	}
	_ = json.Unmarshal(r.Doc, &d)
	return d.Node != "" && d.Node != m.cfg.Node
}

// status derives a Run's status and its process identity status.
func (m *Manager) status(r store.RunRecord) (Status, string) {
	if r.EndedAt.IsZero() && m.isChild(r) {
		// A process this Manager holds unreaped is the one recorded:
		// no need to ask /proc.
		return StatusRunning, identityValid
	}
	ident := verifyProcess(r.PID, r.StartTime)
	if r.EndedAt.IsZero() && (ident == identityValid || ident == identityUnsupported && r.PID > 0) {
		return StatusRunning, ident
	}
	if r.EndedAt.IsZero() && r.PID <= 0 && m.isStarting(r.InstanceID) {
		// Claimed, its process not yet started: it is not gone.
		return StatusRunning, identityStarting
	}
	if r.EndedAt.IsZero() && m.otherNode(r) {
		// Its process lives on the node that supervises it, which
		// records its end, or, should that node die, another node
		// records it lost.
		return StatusRunning, identityOtherNode
	}
	if r.ExitCode == nil && r.EndedAt.IsZero() {
		// Ended but not yet recorded by the supervisor: the exit file
		// written by the wrapper is authoritative.
		r.ExitCode = m.exitFile(r.ID)
	}
	switch {
	case r.Stop == string(StatusKilled) || r.Stop == string(StatusCancelled) || r.Stop == string(StatusLost):
		return Status(r.Stop), ident
	case r.ExitCode == nil:
		return StatusExited, ident
	case *r.ExitCode == 0:
		return StatusDone, ident
	}
	return StatusFailed, ident
}

// view is the derived status view of a Run.
func (m *Manager) view(r store.RunRecord) *Run {
	d := decodeDoc(r)
	status, ident := m.status(r)
	dir := m.stateDir(r.ID)
	v := &Run{
		ID: r.ID, InstanceID: r.InstanceID, Generation: r.Generation, Status: status,
		OwnerID: r.OwnerID, PID: r.PID, ProcessIdentity: ident, StateSchema: StateSchema,
		StateDir: dir, StdoutLog: filepath.Join(dir, "stdout.log"), StderrLog: filepath.Join(dir, "stderr.log"),
		CreatedAt: store.FormatTime(r.CreatedAt), StartedAt: store.FormatTime(r.StartedAt),
		LaunchKind: d.LaunchKind, Recipe: d.Recipe, Tool: d.Tool, Control: nonNilStrings(d.Control),
		ExitCode: r.ExitCode, Archived: r.Archived, Node: d.Node,
	}
	if !r.EndedAt.IsZero() {
		v.EndedAt = store.FormatTime(r.EndedAt)
	}
	if len(d.Artifacts) > 0 {
		v.Artifacts = m.artifactManifest(dir, d.Artifacts)
	}
	if status == StatusFailed || status == StatusExited {
		logDir := dir
		if r.Archived {
			logDir = r.ArchiveDir
		}
		if head := headFile(logDir, filepath.Join(logDir, "stderr.log"), stderrHeadLines, stderrHeadBytes); head != "" {
			v.StderrHead = RedactText(head)
		}
	}
	if r.Archived {
		v.ArchiveDir = r.ArchiveDir
	}
	if status == StatusLost {
		v.Lost = d.Lost
	}
	return v
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// artifactManifest describes the declared artifacts of the Run directory
// dir. An artifact exists when it is a regular file with one link reached
// without a symbolic link (see openRunFile): a link the process planted to
// a file elsewhere does not count.
func (m *Manager) artifactManifest(dir string, arts map[string]Artifact) map[string]ArtifactState {
	out := make(map[string]ArtifactState, len(arts))
	for name, a := range arts {
		e := ArtifactState{Path: a.Path, Kind: a.Kind, MediaType: a.MediaType, Required: a.Required}
		if fi, ok := statRunFile(dir, a.Path); ok {
			size := fi.Size()
			e.Exists, e.Size = true, &size
		}
		out[name] = e
	}
	return out
}

// owned returns Run id when ownerID owns it. Anything else, including a
// Run of another owner, is not_found with the same message.
func (m *Manager) owned(ctx context.Context, ownerID, id string) (store.RunRecord, error) {
	if ValidRunID(id) != nil {
		return store.RunRecord{}, notFound(id)
	}
	r, err := m.st.Run(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && (ownerID == "" || r.OwnerID != ownerID) {
		return store.RunRecord{}, notFound(id)
	}
	return r, err
}

func notFound(id string) *Error {
	return errorf(CodeNotFound, "Run not found: %s. List your Runs with inspect target=runtime view=runs.", id)
}

// Status returns the derived status view of an owned Run.
func (m *Manager) Status(ctx context.Context, ownerID, id string) (*Run, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	r, err := m.owned(ctx, ownerID, id)
	if err != nil {
		return nil, err
	}
	return m.view(r), nil
}

func (m *Manager) emit(ctx context.Context, r store.RunRecord, kind, summary string, data map[string]any, level string) {
	in := TraceInput{Kind: kind, Summary: summary, Level: level}
	if data != nil {
		in.Data, _ = json.Marshal(data)
	}
	ev, line, err := newTraceEvent(in, m.now(), true)
	if err == nil {
		err = m.traces.do(store.TraceAppend{RunID: r.ID, Event: ev, Line: line})
	}
	if err != nil {
		m.log.Warn("append runtime trace", "run", r.ID, "kind", kind, "err", err)
		return
	}
	m.notify(r.OwnerID, r.ID, "run.trace")
}

// AppendTrace validates a producer's event and appends it to the current
// generation of an owned Run. instanceID, when not empty, must be the
// current generation (a service passes the one it started with).
func (m *Manager) AppendTrace(ctx context.Context, ownerID, id, instanceID string, in TraceInput) (store.TraceEvent, error) {
	if err := checkContext(ctx); err != nil {
		return store.TraceEvent{}, err
	}
	ev, line, err := newTraceEvent(in, m.now(), false)
	if err != nil {
		return ev, err
	}
	if ValidRunID(id) != nil {
		return ev, notFound(id)
	}
	h, err := m.head(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && (ownerID == "" || h.owner != ownerID) {
		return ev, notFound(id)
	}
	if err != nil {
		return ev, err
	}
	if instanceID != "" && instanceID != h.instance {
		return ev, errorf(CodeGenerationMismatch, "Run generation changed: %s", id)
	}
	if h.archived {
		return ev, errorf(CodeRunArchived, "Run %s is archived; its Trace is read-only.", id)
	}
	if err := m.traces.do(store.TraceAppend{RunID: id, Event: ev, Line: line}); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return ev, notFound(id)
		}
		return ev, err
	}
	m.notify(h.owner, id, "run.trace")
	return ev, nil
}

// Kill sends SIGKILL to the verified process group of a running Run. It
// bypasses the Control journal (a saturated journal cannot block it). A
// Run that is not running is not an error: the result has Killed false
// and a Reason. A Run another node supervises is killed by that node,
// and Kill answers with what it did (see HandleSignal).
func (m *Manager) Kill(ctx context.Context, ownerID, id string) (*KillResult, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	unlock := m.lock(id)
	r, err := m.owned(ctx, ownerID, id)
	if err != nil {
		unlock()
		return nil, err
	}
	if node := m.supervisor(r); node != "" {
		unlock()
		if status, _ := m.status(r); status != StatusRunning {
			return &KillResult{Reason: "not running", Status: status}, nil
		}
		return m.forwardKill(ctx, r, node)
	}
	defer unlock()
	return m.killLocked(ctx, r)
}

// killLocked kills Run r, whose lock the caller holds.
func (m *Manager) killLocked(ctx context.Context, r store.RunRecord) (*KillResult, error) {
	id := r.ID
	status, ident := m.status(r)
	if status != StatusRunning {
		return &KillResult{Reason: "not running", Status: status}, nil
	}
	if ident != identityValid {
		return &KillResult{Reason: strings.ReplaceAll(ident, "_", " "), Status: status, ProcessIdentity: ident}, nil
	}
	r.Stop = string(StatusKilled)
	if err := m.saveRun(ctx, r); err != nil {
		return nil, err
	}
	target := "processGroup"
	if verifyProcess(r.PID, r.StartTime) != identityValid {
		return nil, errorf(CodeIdentity, "Run process identity changed before signaling: %s", id)
	}
	if err := syscall.Kill(-r.PID, syscall.SIGKILL); err != nil {
		if !errors.Is(err, syscall.ESRCH) {
			return nil, fmt.Errorf("run: kill %s: %w", id, err)
		}
		target = "process"
		if err := syscall.Kill(r.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return nil, fmt.Errorf("run: kill %s: %w", id, err)
		}
	}
	m.emit(ctx, r, "run.kill", "Killed Run process", map[string]any{"pid": r.PID, "signal": "SIGKILL", "signal_target": target}, "warning")
	return &KillResult{Killed: true, Stopped: true, PID: r.PID, Signal: "SIGKILL", SignalTarget: target, StateDir: m.stateDir(id)}, nil
}

// Archive moves a terminal Run's directory to <data>/archive/runs/ and leaves a
// tombstone at its address; the Run then reports archived.
func (m *Manager) Archive(ctx context.Context, ownerID, id string) (*ArchiveResult, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	unlock := m.lock(id)
	defer unlock()
	r, err := m.owned(ctx, ownerID, id)
	if err != nil {
		return nil, err
	}
	if r.Archived {
		return nil, errorf(CodeRunArchived, "Run %s is already archived at %s.", id, r.ArchiveDir)
	}
	status, _ := m.status(r)
	if status == StatusRunning {
		return nil, errorf(CodeNotTerminal, "Only terminal runs can be archived or pruned. Kill run:%s first.", id)
	}
	now := m.now()
	ts := strings.NewReplacer(":", "-", ".", "-").Replace(store.FormatTime(now))
	dst := filepath.Join(m.cfg.DataDir, "archive", "runs", id+"-"+ts)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return nil, fmt.Errorf("run: archive: %w", err)
	}
	src := m.stateDir(id)
	if err := os.Rename(src, dst); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("run: archive: %w", err)
	}
	res := &ArchiveResult{Archived: true, ArchiveDir: dst, OriginalStateDir: src, Run: id, Status: status, TS: store.FormatTime(now)}
	if err := os.MkdirAll(src, 0o700); err == nil {
		b, _ := json.MarshalIndent(res, "", "  ")
		if f, err := os.OpenFile(filepath.Join(src, "archive-tombstone.json"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600); err == nil {
			_, _ = f.Write(append(b, '\n'))
			f.Close()
		}
	}
	r.Archived, r.ArchiveDir = true, dst
	if err := m.saveRun(ctx, r); err != nil {
		return nil, err
	}
	return res, nil
}

// Prune deletes a terminal Run: its directory and its records. With
// preserve, each existing declared artifact is first copied to
// <data>/archive/preserved-artifacts/<id>/; a failed copy aborts before anything is
// deleted.
func (m *Manager) Prune(ctx context.Context, ownerID, id string, preserve bool) (*PruneResult, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	unlock := m.lock(id)
	defer unlock()
	r, err := m.owned(ctx, ownerID, id)
	if err != nil {
		return nil, err
	}
	status, _ := m.status(r)
	if status == StatusRunning && !r.Archived {
		return nil, errorf(CodeNotTerminal, "Only terminal runs can be archived or pruned. Kill run:%s first.", id)
	}
	d := decodeDoc(r)
	kept := map[string]string{}
	if preserve {
		for _, name := range slices.Sorted(maps.Keys(d.Artifacts)) {
			a := d.Artifacts[name]
			p := a.Path
			if r.Archived && strings.HasPrefix(p, m.stateDir(id)+"/") {
				p = filepath.Join(r.ArchiveDir, strings.TrimPrefix(p, m.stateDir(id)+"/"))
			}
			root := m.stateDir(id)
			if r.Archived {
				root = r.ArchiveDir
			}
			in, fi, err := openRunFile(root, p)
			if err != nil {
				continue
			}
			sum := sha256.Sum256([]byte(name + "\x00" + a.Path))
			safe := unsafeNameChars.ReplaceAllString(name, "_")
			dst := filepath.Join(m.cfg.DataDir, "archive", "preserved-artifacts", id, safe+"-"+hex.EncodeToString(sum[:])[:8]+"--"+filepath.Base(p))
			err = copyFile(in, fi.Size(), dst)
			in.Close()
			if err != nil {
				return nil, errorf(CodePreserveFailed, "Run %s was not pruned: artifact %s could not be preserved (%v); nothing was deleted. Fix the cause or prune without preserve_artifacts.", id, name, err)
			}
			kept[name] = dst
		}
	}
	if err := os.RemoveAll(m.stateDir(id)); err != nil {
		return nil, fmt.Errorf("run: prune %s: %w", id, err)
	}
	if r.Archived && r.ArchiveDir != "" {
		_ = os.RemoveAll(r.ArchiveDir)
	}
	defer m.forget(id)
	if err := m.st.DeleteRun(ctx, id); err != nil {
		return nil, err
	}
	m.notify(r.OwnerID, id, "run.status")
	return &PruneResult{Pruned: true, PreservedArtifacts: kept, Run: id, StateDir: m.stateDir(id), TS: store.FormatTime(m.now())}, nil
}

// copyFile copies the first size bytes of in (its size when opened) to
// dst, a new file of the server's.
func copyFile(in *os.File, size int64, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(out, in, size); err != nil && !errors.Is(err, io.EOF) {
		out.Close()
		return err
	}
	return out.Close()
}

// Logs returns the last n lines (all when n ≤ 0) of an owned Run's stdout
// or stderr ("stdout" or "stderr").
func (m *Manager) Logs(ctx context.Context, ownerID, id, stream string, n int) (string, error) {
	if err := checkContext(ctx); err != nil {
		return "", err
	}
	r, err := m.owned(ctx, ownerID, id)
	if err != nil {
		return "", err
	}
	if stream != "stdout" && stream != "stderr" {
		return "", errorf(CodeInvalidRequest, "stream must be stdout or stderr")
	}
	if node := m.supervisor(r); node != "" {
		if r.Stop == string(StatusLost) {
			// Its node stopped answering: do not wait for it.
			return "", &Error{Code: CodeNodeUnavailable, Message: fmt.Sprintf(
				"Run %s was lost with node %s, which keeps its logs; read them once that node is back, or on its machine.", id, node),
				Details: map[string]any{"node": node, "run": id}}
		}
		return m.forwardLogs(ctx, r, node, stream, n)
	}
	return m.tailLogs(r, stream, n)
}

// logTailMaxBytes bounds how much of a log Logs reads: its last MiB.
const logTailMaxBytes = store.RunRequestTextMaxBytes

// tailLogs returns the last n lines of Run r's stream, from this node's
// files. A log the Run replaced by anything but a regular file with one
// link (a symbolic link, FIFO, hard link) reads as empty, and the server
// logs a warning.
func (m *Manager) tailLogs(r store.RunRecord, stream string, n int) (string, error) {
	dir := m.stateDir(r.ID)
	if r.Archived {
		dir = r.ArchiveDir
	}
	s, err := tailFile(dir, filepath.Join(dir, stream+".log"), n, logTailMaxBytes)
	if errors.Is(err, errRunFileUnsafe) {
		m.log.Warn("Run log is not a regular file with one link; it reads as empty", "run", r.ID, "stream", stream)
		return "", nil
	}
	return s, err
}

// headFile returns at most the first n lines and limit bytes of path, a
// file in the Run directory dir (see openRunFile), cut on a UTF-8
// boundary, or "" when it cannot be read.
func headFile(dir, path string, n, limit int) string {
	f, _, err := openRunFile(dir, path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b := make([]byte, limit)
	k, _ := io.ReadFull(f, b)
	b = b[:k]
	for len(b) > 0 && !utf8.Valid(b) {
		b = b[:len(b)-1]
	}
	lines := strings.SplitAfter(MaskString(string(b), nil), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.TrimRight(strings.Join(lines, ""), "\n")
}

// boundLines cuts every line of s to limit bytes (on a UTF-8 boundary),
// marking a cut line with " … [truncated]".
func boundLines(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		body := strings.TrimSuffix(l, "\n")
		if len(body) <= limit {
			continue
		}
		c := limit
		for c > 0 && !utf8.RuneStart(body[c]) {
			c--
		}
		lines[i] = body[:c] + " … [truncated]" + l[len(body):]
	}
	return strings.Join(lines, "")
}

// tailFile reads at most limit bytes from the end of path, a file in the
// Run directory dir (see openRunFile), and returns its last n lines. A
// missing file is empty; one that is not a regular file with one link is
// errRunFileUnsafe.
func tailFile(dir, path string, n int, limit int64) (string, error) {
	f, fi, err := openRunFile(dir, path)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	return tailOf(f, fi.Size(), n, limit)
}

// tailOf returns the last n lines of the last limit bytes of the first
// size bytes of f.
func tailOf(f *os.File, size int64, n int, limit int64) (string, error) {
	off := max(size-limit, 0)
	b := make([]byte, size-off)
	k, err := f.ReadAt(b, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	b = b[:k]
	s := string(b)
	if n > 0 {
		lines := strings.SplitAfter(s, "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		s = strings.Join(lines, "")
	}
	// Bearer tokens are masked here too, for a process that wrote its
	// log without a Run's init to mask it.
	return boundLines(MaskString(s, nil), logLineMaxBytes), nil
}

// List returns the derived status views of ownerID's Runs, oldest first,
// filtered by status: all (or empty), active, terminal or an exact status.
func (m *Manager) List(ctx context.Context, ownerID, status string) ([]Run, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	if ownerID == "" {
		return nil, errorf(CodeInvalidRequest, "runtime Run inventory requires a principal")
	}
	return m.list(ctx, ownerID, status)
}

// ListAll is List over every owner's Runs, for a person who oversees the
// agents and services that started them. Each view names its owner
// ("owner_id").
func (m *Manager) ListAll(ctx context.Context, status string) ([]Run, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	return m.list(ctx, "", status)
}

// Owner returns the id of the principal that owns Run id. An unknown or
// malformed id is not_found.
func (m *Manager) Owner(ctx context.Context, id string) (string, error) {
	if err := checkContext(ctx); err != nil {
		return "", err
	}
	if ValidRunID(id) != nil {
		return "", notFound(id)
	}
	h, err := m.head(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", notFound(id)
	}
	return h.owner, err
}

func (m *Manager) list(ctx context.Context, ownerID, status string) ([]Run, error) {
	runs, err := m.st.ListRuns(ctx, ownerID)
	if err != nil {
		return nil, err
	}
	out := []Run{}
	for _, r := range runs {
		v := m.view(r)
		switch status {
		case "", "all":
		case "active":
			if v.Status != StatusRunning {
				continue
			}
		case "terminal":
			if v.Status == StatusRunning {
				continue
			}
		default:
			if string(v.Status) != status {
				continue
			}
		}
		out = append(out, *v)
	}
	slices.SortStableFunc(out, func(a, b Run) int { return cmp.Compare(a.CreatedAt, b.CreatedAt) })
	return out, nil
}
