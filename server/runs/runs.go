package runs

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/assent-run/assent"
	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
	"github.com/assent-run/assent/wire"
)

// Part is the Runs part of the server: the supervisor and the actors_*
// tools. It serves /v1/runs, the Runs pages and the inbox's tool and
// Recipe proposals.
type Part struct {
	Deps
	runs     *run.Manager
	runTools *run.ToolSet

	// stopLeases ends the lease keeper; leasesDone is closed once it
	// has.
	stopLeases context.CancelFunc
	leasesDone chan struct{}
	// leasesKept is when the lease keeper last finished a round with the
	// store (Unix nanoseconds; 0 before the first).
	leasesKept atomic.Int64
	// leaseTTL is the lease keeper's time to live; 0 without a keeper.
	leaseTTL time.Duration
	// stopSignals ends the follower of other nodes' Signals.
	stopSignals func()
	// stopSweep ends the sweeper of proposals past their deadline and
	// waits for it.
	stopSweep func()
}

// runTokens mints run-scoped tokens (ASSENT_RUN_TOKEN). Each is a service
// principal whose grants name the Run's owner and the Run generation; the
// Runs API lets it act for the owner on that generation only.
type runTokens struct{ s *Part }

func (t runTokens) IssueRunToken(ctx context.Context, ownerID, runID, instanceID string) (string, string, error) {
	tok, p, err := auth.IssueToken(ctx, t.s.Store.Backend, store.KindService, "run:"+runID,
		[]string{host.GrantRunOwner + ownerID, host.GrantRunScope + runID + "/" + instanceID}, t.s.Now())
	return tok, p.ID, err
}

func (t runTokens) RevokeRunToken(ctx context.Context, tokenID string) error {
	return t.s.RevokePrincipal(ctx, tokenID)
}

// New builds the Runs part on d: it starts the supervisor, which picks up
// the Runs a previous process left, and registers the actors_* tools.
func New(ctx context.Context, d Deps) (*Part, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	s := &Part{Deps: d}
	if err := s.Web.AddPages(templateFS, "templates/*.html"); err != nil {
		return nil, err
	}
	// Requests about another node's Run travel as Signals on the bus that
	// nodes share; a bus of this process alone has no other node to reach,
	// so every Run is acted on here, as one node always has.
	var signal func(string, run.Signal)
	if s.SharedBus {
		signal = s.publishSignal
	}
	// Signals are followed from before the manager starts, so one sent
	// while it re-adopts this node's Runs is not missed.
	from := s.Bus.Seq()
	m, err := run.New(ctx, run.Config{
		Store: s.Store.Runs, DataDir: s.Config.DataDir, Now: s.Now, Logger: s.Log.With("part", "runs"),
		Tokens: runTokens{s}, URL: s.Config.BaseURL, Version: assent.Version, RunUser: s.Config.RunUser,
		Node: s.Config.Node, Leases: s.Store.Cluster, LeaseTTL: s.Config.LeaseTTL, Network: s.Config.Network,
		Notify: func(ownerID, runID, kind string) {
			data, _ := json.Marshal(map[string]string{"run": runID})
			s.Bus.Publish(s.OwnedEvent(kind, ownerID, data))
		},
		Signal: signal,
	})
	if err != nil {
		return nil, err
	}
	s.runs = m
	if s.runTools, err = run.NewToolSet(m, s.Tools, run.ToolStores{Proposals: s.Store.Proposals, Principals: s.Store.Principals, Notes: s.proposalNotes,
		Deadlines: s.Store.Deadlines, DefaultDeadline: s.Config.DecisionDeadline, Groups: s.Store.Backend.Groups()}); err != nil {
		m.Close()
		return nil, err
	}
	if err := s.runTools.Register(ctx); err != nil {
		m.Close()
		return nil, err
	}
	s.keepLeases()
	s.followSignals(from)
	s.sweepDeadlines()
	return s, nil
}

// keepLeases runs the lease keeper until Close: it renews this node's
// Run leases and finds the Runs of nodes that stopped renewing theirs.
func (s *Part) keepLeases() {
	k := s.runs.LeaseKeeper()
	if k == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stopLeases, s.leasesDone = cancel, make(chan struct{})
	s.leaseTTL = 3 * k.Interval()
	log := s.Log.With("part", "runs", "node", s.Config.Node)
	go func() {
		defer close(s.leasesDone)
		k.Keep(ctx, func(rep run.LeaseReport, err error) {
			if err != nil && ctx.Err() == nil {
				log.Warn("run leases not kept this round; retrying", "err", err)
			}
			if err == nil {
				s.leasesKept.Store(time.Now().UnixNano())
			}
			for _, id := range rep.Taken {
				log.Warn("another node took over a Run this node supervised", "run", id)
			}
			for _, l := range rep.Lost {
				args := []any{"run", l.Run.ID, "lost_node", l.Run.Lost.Node, "lease_expired_at", l.Run.Lost.LeaseExpiredAt}
				if l.Restarted != nil {
					args = append(args, "restarted_generation", l.Restarted.Generation)
				}
				log.Warn("Run lost: its node stopped renewing its lease", args...)
			}
			for _, e := range rep.Errors {
				log.Warn("run lease", "err", e)
			}
		})
	}()
}

//go:embed templates/*.html
var templateFS embed.FS

// Name names the part.
func (s *Part) Name() string { return "runs" }

// CountOpen counts p's active Runs and the command and tool proposals
// waiting: for a person, those routed to them (the inbox cards); for an
// agent or service, those it filed.
func (s *Part) CountOpen(ctx context.Context, p store.Principal) map[string]int {
	out := map[string]int{"runs": 0, "command_proposals": 0}
	if runs, err := s.listRuns(ctx, p, "active"); err == nil {
		out["runs"] = len(runs)
	}
	if s.runTools != nil {
		if pending, err := s.runTools.Proposals(ctx, p, store.ProposalPending); err == nil {
			var filed []host.Filed
			for _, pr := range pending {
				switch {
				case p.Kind == store.KindHuman:
					filed = append(filed, host.Filed{By: pr.ProposerID, Group: s.runTools.ProposalEscalatedTo(ctx, pr.ID)})
				case pr.ProposerID == p.ID:
					out["command_proposals"]++
				}
			}
			if p.Kind == store.KindHuman {
				out["command_proposals"] = s.CountRouted(ctx, p, filed)
			}
		}
	}
	return out
}

// LeasesCurrent reports whether this node's Run leases are current: the
// lease keeper finished a round with the store within the last lease time
// to live, so no other node takes this node's Runs for lost. Without a
// lease keeper there is nothing to keep current.
func (s *Part) LeasesCurrent(now time.Time) bool {
	if s.leaseTTL == 0 {
		return true
	}
	kept := s.leasesKept.Load()
	return kept != 0 && now.Sub(time.Unix(0, kept)) < s.leaseTTL
}

// Manager returns the Run supervisor.
func (s *Part) Manager() *run.Manager { return s.runs }

// Close stops supervising; Runs keep running and are picked up by the next start.
func (s *Part) Close() {
	if s.stopSweep != nil {
		s.stopSweep()
	}
	if s.stopSignals != nil {
		s.stopSignals()
	}
	if s.stopLeases != nil {
		s.stopLeases()
		<-s.leasesDone
	}
	if s.runs != nil {
		s.runs.Close()
	}
}

// Routes registers the part's routes and pages on mux.
func (s *Part) Routes(mux *host.Mux) {
	h := func(f http.HandlerFunc) http.Handler { return s.Authed(f) }
	mux.Handle("POST /v1/runs", h(s.handleRunSpawn))
	mux.Handle("GET /v1/runs", h(s.handleRunList))
	mux.Handle("POST /v1/runs/inspect", h(s.handleRunInspect))
	mux.Handle("GET /v1/runs/{id}", h(s.handleRunView))
	mux.Handle("GET /v1/runs/{id}/views/{view}", h(s.handleRunView))
	mux.Handle("GET /v1/runs/{id}/logs", h(s.handleRunLogs))
	mux.Handle("POST /v1/runs/{id}/controls", h(s.handleRunControl))
	mux.Handle("POST /v1/runs/{id}/controls/claim", h(s.handleRunClaim))
	mux.Handle("POST /v1/runs/{id}/controls/{cid}/handled", h(s.handleRunSettle(true)))
	mux.Handle("POST /v1/runs/{id}/controls/{cid}/failed", h(s.handleRunSettle(false)))
	mux.Handle("POST /v1/runs/{id}/trace", h(s.handleRunTrace))
	mux.Handle("POST /v1/runs/{id}/kill", h(s.handleRunRetain("kill")))
	mux.Handle("POST /v1/runs/{id}/archive", h(s.handleRunRetain("archive")))
	mux.Handle("POST /v1/runs/{id}/prune", h(s.handleRunRetain("prune")))
	s.routesRunsWeb(mux)
}

// runCaller resolves who acts on Run id: a run-scoped token acts for the
// Run's owner on its own generation only (instance is that generation);
// anyone else acts as themselves. A run-scoped token used for another Run
// acts for nobody, so the Run answers not_found.
func runCaller(p store.Principal, id string) (owner, instance string) {
	var scoped bool
	for _, g := range p.Grants {
		switch {
		case strings.HasPrefix(g, host.GrantRunOwner):
			owner = strings.TrimPrefix(g, host.GrantRunOwner)
		case strings.HasPrefix(g, host.GrantRunScope):
			scoped = true
			rid, inst, _ := strings.Cut(strings.TrimPrefix(g, host.GrantRunScope), "/")
			if rid == id {
				instance = inst
			}
		}
	}
	if !scoped {
		return p.ID, ""
	}
	if instance == "" {
		return "", ""
	}
	return owner, instance
}

// runActor is runCaller for a request about Run id, where a person acts as
// the Run's owner when they supervise it (see oversees), as they do for
// screens and approvals. Agents stay confined to their own Runs.
func (s *Part) runActor(ctx context.Context, p store.Principal, id string) (owner, instance string) {
	owner, instance = runCaller(p, id)
	if p.Kind == store.KindHuman && owner == p.ID {
		if o, err := s.runs.Owner(ctx, id); err == nil && s.Oversees(ctx, p, o) {
			owner = o
		}
	}
	return owner, instance
}

// listRuns lists the Runs p may see: a person's view is the Runs of the
// principals they supervise and their own, an agent's or service's its own.
func (s *Part) listRuns(ctx context.Context, p store.Principal, status string) ([]run.Run, error) {
	if p.Kind == store.KindHuman {
		all, err := s.runs.ListAll(ctx, status)
		if err != nil {
			return nil, err
		}
		out := all[:0]
		seen := map[string]bool{} // one principal lookup per owner, not per Run
		for _, r := range all {
			o := r.OwnerID
			ok, known := seen[o]
			if !known {
				ok = s.Oversees(ctx, p, o)
				seen[o] = ok
			}
			if ok {
				out = append(out, r)
			}
		}
		return out, nil
	}
	owner := ownerOf(p)
	if owner == "" {
		return []run.Run{}, nil
	}
	return s.runs.List(ctx, owner, status)
}

// ownerOf is who acts for requests that are not about one Run: a
// run-scoped token acts for nobody there.
func ownerOf(p store.Principal) string {
	for _, g := range p.Grants {
		if strings.HasPrefix(g, host.GrantRunScope) {
			return ""
		}
	}
	return p.ID
}

// writeRunError answers err: a *run.Error keeps its code, with the status
// and retryable flag of the wire table and its details as data.
func writeRunError(w http.ResponseWriter, err error) {
	var e *run.Error
	if errors.As(err, &e) {
		host.WriteAPIError(w, wire.New(wire.Code(e.Code), e.Message).WithData(e.Details))
		return
	}
	host.WriteToolError(w, err)
}

type spawnBody = api.SpawnRequest

func (s *Part) handleRunSpawn(w http.ResponseWriter, r *http.Request) {
	var b spawnBody
	if !host.DecodeJSON(w, r, 0, &b) {
		return
	}
	owner := ownerOf(host.PrincipalOf(r))
	if owner == "" {
		host.WriteError(w, wire.Forbidden, "a run-scoped token cannot start Runs")
		return
	}
	id := b.RunID
	if b.As != "" {
		var err error
		if id, err = run.ParseTarget(b.As); err != nil {
			writeRunError(w, err)
			return
		}
	}
	why, rerr := tool.CheckReason(b.Reason)
	if rerr != nil {
		host.WriteToolError(w, rerr)
		return
	}
	req := run.SpawnRequest{Recipe: b.Recipe, Template: b.Template, Values: b.Values, RunID: id, Artifacts: b.Artifacts, Reason: why, DeadlineSeconds: b.DeadlineSeconds, EscalateTo: b.EscalateTo}
	if len(b.Template) > 0 && !run.MayExecute(host.PrincipalOf(r)) {
		// An agent's own command waits for a person (runs_proposals.go).
		v, err := s.runTools.ProposeSpawn(r.Context(), host.PrincipalOf(r), req)
		if err != nil {
			writeRunError(w, err)
			return
		}
		host.WriteJSON(w, http.StatusAccepted, v)
		return
	}
	v, err := s.runs.Spawn(r.Context(), owner, req)
	if err != nil {
		writeRunError(w, err)
		return
	}
	host.WriteJSON(w, http.StatusCreated, v)
}

func (s *Part) handleRunList(w http.ResponseWriter, r *http.Request) {
	owner := ownerOf(host.PrincipalOf(r))
	runs, err := s.listRuns(r.Context(), host.PrincipalOf(r), r.URL.Query().Get("status"))
	if err != nil {
		writeRunError(w, err)
		return
	}
	host.WriteJSON(w, http.StatusOK, &run.RunList{OwnerSession: owner, Runs: runs})
}

func (s *Part) handleRunInspect(w http.ResponseWriter, r *http.Request) {
	var req run.InspectRequest
	if !host.DecodeJSON(w, r, 0, &req) {
		return
	}
	owner := ownerOf(host.PrincipalOf(r))
	if id, err := run.ParseTarget(req.Target); err == nil {
		owner, _ = s.runActor(r.Context(), host.PrincipalOf(r), id)
	}
	v, err := s.runTools.Inspect(r.Context(), owner, req)
	if err != nil {
		writeRunError(w, err)
		return
	}
	host.WriteJSON(w, http.StatusOK, v)
}

func (s *Part) handleRunView(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	owner, _ := s.runActor(r.Context(), host.PrincipalOf(r), id)
	view := r.PathValue("view")
	if view == "" {
		view = "status"
	}
	q := r.URL.Query()
	lines, _ := strconv.Atoi(q.Get("lines"))
	v, err := s.runs.Inspect(r.Context(), owner, run.InspectRequest{Target: "run:" + id, View: view, Lines: lines, Source: q.Get("source")})
	if err != nil {
		writeRunError(w, err)
		return
	}
	host.WriteJSON(w, http.StatusOK, v)
}

func (s *Part) handleRunLogs(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	owner, _ := s.runActor(r.Context(), host.PrincipalOf(r), id)
	q := r.URL.Query()
	stream := q.Get("stream")
	if stream == "" {
		stream = "stdout"
	}
	lines, _ := strconv.Atoi(q.Get("lines"))
	text, err := s.runs.Logs(r.Context(), owner, id, stream, lines)
	if err != nil {
		writeRunError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	io.WriteString(w, text)
}

func (s *Part) handleRunControl(w http.ResponseWriter, r *http.Request) {
	var b api.RunControlRequest
	if !host.DecodeJSON(w, r, 0, &b) {
		return
	}
	id := r.PathValue("id")
	owner, instance := s.runActor(r.Context(), host.PrincipalOf(r), id)
	if instance != "" {
		// A service steers nothing but itself through its own journal.
		host.WriteError(w, wire.Forbidden, "a run-scoped token cannot apply Controls; it claims and settles them")
		return
	}
	v, err := s.runs.ApplyAs(r.Context(), owner, host.PrincipalOf(r).ID, id, b.Action, b.Input)
	if err != nil {
		writeRunError(w, err)
		return
	}
	host.WriteJSON(w, http.StatusOK, v)
}

func (s *Part) handleRunClaim(w http.ResponseWriter, r *http.Request) {
	var b api.ClaimRequest
	if !host.DecodeJSON(w, r, 0, &b) {
		return
	}
	id := r.PathValue("id")
	owner, instance, err := runGeneration(host.PrincipalOf(r), id, b.InstanceID)
	if err != nil {
		writeRunError(w, err)
		return
	}
	c, err := s.runs.Claim(r.Context(), owner, id, instance, b.ID)
	if err != nil {
		writeRunError(w, err)
		return
	}
	host.WriteJSON(w, http.StatusOK, c)
}

// runGeneration returns the owner and generation a claim or settlement acts
// on: a run-scoped token's own generation (which the body may repeat but not
// contradict), or the generation the body names.
func runGeneration(p store.Principal, id, named string) (owner, instance string, err error) {
	owner, instance = runCaller(p, id)
	switch {
	case instance == "":
		instance = named
	case named != "" && named != instance:
		return "", "", &run.Error{Code: run.CodeGenerationMismatch, Message: "Run generation changed: " + id}
	}
	return owner, instance, nil
}

func (s *Part) handleRunSettle(handled bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var b api.SettleRequest
		if !host.DecodeJSON(w, r, 0, &b) {
			return
		}
		id := r.PathValue("id")
		owner, instance, err := runGeneration(host.PrincipalOf(r), id, b.InstanceID)
		if err != nil {
			writeRunError(w, err)
			return
		}
		c, err := s.runs.Settle(r.Context(), owner, id, instance, r.PathValue("cid"), handled, b.Error)
		if err != nil {
			writeRunError(w, err)
			return
		}
		host.WriteJSON(w, http.StatusOK, c)
	}
}

func (s *Part) handleRunTrace(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 2*run.TraceEventMaxBytes))
	if err != nil {
		host.WriteError(w, wire.TooLarge, fmt.Sprintf("a Trace event is at most %d bytes", run.TraceEventMaxBytes))
		return
	}
	in, err := run.DecodeTraceInput(body)
	if err != nil {
		writeRunError(w, err)
		return
	}
	id := r.PathValue("id")
	owner, instance := s.runActor(r.Context(), host.PrincipalOf(r), id)
	ev, err := s.runs.AppendTrace(r.Context(), owner, id, instance, in)
	if err != nil {
		writeRunError(w, err)
		return
	}
	host.WriteJSON(w, http.StatusCreated, ev)
}

func (s *Part) handleRunRetain(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var b api.RetainRequest
		if r.ContentLength != 0 && !host.DecodeJSON(w, r, 0, &b) {
			return
		}
		id := r.PathValue("id")
		owner, instance := s.runActor(r.Context(), host.PrincipalOf(r), id)
		if instance != "" {
			host.WriteError(w, wire.Forbidden, "a run-scoped token cannot "+action+" its Run")
			return
		}
		var v any
		var err error
		switch action {
		case "kill":
			v, err = s.runs.Kill(r.Context(), owner, id)
		case "archive":
			v, err = s.runs.Archive(r.Context(), owner, id)
		default:
			v, err = s.runs.Prune(r.Context(), owner, id, b.PreserveArtifacts)
		}
		if err != nil {
			writeRunError(w, err)
			return
		}
		host.WriteJSON(w, http.StatusOK, v)
	}
}

// ToolSet returns the actors_* tools.
func (s *Part) ToolSet() *run.ToolSet { return s.runTools }
