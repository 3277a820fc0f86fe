package controls

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
)

// NoDecision is the reason recorded when a staged value is discarded
// because no person decided it before its deadline.
const NoDecision = "no decision before the deadline"

// SourceDeadline is the source of the discard a deadline makes, in the
// audit log and the control.command event.
const SourceDeadline control.Source = "deadline"

// MaxDeadlineSeconds bounds a stage's deadline_seconds (30 days).
const MaxDeadlineSeconds = 30 * 24 * 3600

// DefaultSweep is how often the part looks for staged values past their
// deadline.
const DefaultSweep = time.Second

// unmatchedGrace is how long past its deadline a deadline whose value this
// node does not see open is kept before it is removed: a value decided
// before its deadline has nothing to discard, and one staged on another
// node reaches this node's registry well within it.
const unmatchedGrace = time.Minute

// deadlineItem is the item under which the deadline of revision rev of the
// control id is kept.
func deadlineItem(id control.Identity, rev int64) string {
	return id.String() + "@" + strconv.FormatInt(rev, 10)
}

// checkDeadlineSeconds refuses a deadline_seconds out of bounds, or given
// with another action than stage.
func checkDeadlineSeconds(a executeArgs) *control.Error {
	switch {
	case a.EscalateTo != "" && a.Action != control.Stage:
		return &control.Error{Reason: control.ReasonInvalidRequest, Message: `"escalate_to" goes with stage only`}
	case a.DeadlineSeconds == 0:
		return nil
	case a.Action != control.Stage:
		return &control.Error{Reason: control.ReasonInvalidRequest, Message: `"deadline_seconds" goes with stage only`}
	case a.DeadlineSeconds < 0 || a.DeadlineSeconds > MaxDeadlineSeconds:
		return &control.Error{Reason: control.ReasonInvalidRequest,
			Message: fmt.Sprintf("deadline_seconds must be between 1 and %d (30 days); leave it out for the server's default", MaxDeadlineSeconds)}
	}
	return nil
}

// checkEscalation refuses, before anything is staged, an escalate_to
// without a deadline (neither deadline_seconds nor, for an agent's stage,
// the server's default) as invalid_request, and one naming a group
// without members as invalid_value.
func (s *Part) checkEscalation(ctx context.Context, a executeArgs, src control.Source) *control.Error {
	if a.EscalateTo == "" || a.Action != control.Stage {
		return nil
	}
	if a.DeadlineSeconds <= 0 && (src != control.SourceAgent || s.Config.DecisionDeadline <= 0) {
		return &control.Error{Reason: control.ReasonInvalidRequest,
			Message: "escalate_to needs a deadline: give deadline_seconds too (this server sets no default deadline for this stage)"}
	}
	var members []string
	var err error
	if s.Store.Groups != nil && store.CheckGroupName(a.EscalateTo) == nil {
		members, err = s.Store.Groups.GroupMembers(ctx, a.EscalateTo)
	}
	if err != nil {
		s.Log.Error("the members of an escalation group could not be read", "group", a.EscalateTo, "err", err)
		return &control.Error{Reason: control.ReasonStoreUnavailable, Message: "the escalation group could not be read from the store; try again shortly"}
	}
	if len(members) == 0 {
		return &control.Error{Reason: control.ReasonInvalidValue,
			Message: fmt.Sprintf("escalate_to %q is not a group with members, so nobody could decide the value once escalated; name a group with members", a.EscalateTo)}
	}
	return nil
}

// deadlineOf returns the stored deadline of revision rev of the control
// id, and whether it has one.
func (s *Part) deadlineOf(ctx context.Context, id control.Identity, rev int64) (store.DecisionDeadline, bool) {
	if s.Store.Deadlines == nil {
		return store.DecisionDeadline{}, false
	}
	d, err := s.Store.Deadlines.Deadline(ctx, store.DeadlineControlProposal, deadlineItem(id, rev))
	return d, err == nil
}

// EscalatedTo returns the group revision rev of the control id was routed
// to at its first deadline, or "" when it was not.
func (s *Part) EscalatedTo(ctx context.Context, id control.Identity, rev int64) string {
	if d, ok := s.deadlineOf(ctx, id, rev); ok && d.Escalated() {
		return d.EscalateTo
	}
	return ""
}

// stageDeadline is what a command asks of the deadline of the value it
// stages: seconds after the stage when positive, else the server's
// default for values agents stage, and the group it escalates to (or "").
type stageDeadline struct {
	seconds    int64
	escalateTo string
}

// stagedDeadline returns the deadline of revision rev of the control id, staged
// at stagedAt by a principal of source src, and whether it has one. The
// server's default is for values agents stage; a person's own stage waits
// only as long as they ask.
func (s *Part) stagedDeadline(id control.Identity, src control.Source, rev int64, stagedAt time.Time, sd stageDeadline) (store.DecisionDeadline, bool) {
	if s.Store.Deadlines == nil {
		return store.DecisionDeadline{}, false
	}
	d := time.Duration(0)
	if src == control.SourceAgent {
		d = s.Config.DecisionDeadline
	}
	if sd.seconds > 0 {
		d = time.Duration(sd.seconds) * time.Second
	}
	if d <= 0 {
		return store.DecisionDeadline{}, false
	}
	return store.DecisionDeadline{Kind: store.DeadlineControlProposal, Item: deadlineItem(id, rev),
		Due: stagedAt.Add(d), CreatedAt: stagedAt, EscalateTo: sd.escalateTo}, true
}

// keepDeadline stores the deadline of the proposal res staged, for a
// store that could not keep it with the stage itself. It returns the
// deadline, zero when there is none.
func (s *Part) keepDeadline(ctx context.Context, res control.Result, sd stageDeadline) time.Time {
	st := res.Snapshot.State.Staged
	if !res.OK || res.Action != control.Stage || st == nil {
		return time.Time{}
	}
	dl, ok := s.stagedDeadline(res.Identity, st.Provenance.Source, st.Revision, st.StagedAt, sd)
	if !ok {
		return time.Time{}
	}
	if err := s.Store.Deadlines.SetDeadline(context.WithoutCancel(ctx), dl); err != nil {
		s.Log.Error("the deadline of a staged value could not be kept; it waits without one", "control", res.Identity.String(), "err", err)
		return time.Time{}
	}
	return dl.Due
}

// ProposalDeadline returns when revision rev of the control id is
// discarded if no person decides it, or the zero time.
func (s *Part) ProposalDeadline(ctx context.Context, id control.Identity, rev int64) time.Time {
	if s.Store.Deadlines == nil {
		return time.Time{}
	}
	d, err := s.Store.Deadlines.Deadline(ctx, store.DeadlineControlProposal, deadlineItem(id, rev))
	if err != nil {
		return time.Time{}
	}
	return d.Due
}

// sweepDeadlines runs, until Close, the sweeper that discards the staged
// values past their deadline: at once, then every Config.Sweep. Its first
// pass first gives the server's default deadline to values staged without
// one kept.
func (s *Part) sweepDeadlines() {
	if s.Store.Deadlines == nil {
		return
	}
	every := s.Config.Sweep
	if every <= 0 {
		every = DefaultSweep
	}
	first := true
	s.stopSweep = host.Repeat(every, func(ctx context.Context) {
		if first {
			first = false
			if err := s.keepDefaultDeadlines(ctx); err != nil && ctx.Err() == nil {
				s.Log.Warn("default deadlines of staged values could not be kept", "err", err)
			}
		}
		if _, err := s.ExpireDue(ctx); err != nil && ctx.Err() == nil {
			s.Log.Warn("staged values past their deadline could not be discarded; trying again", "err", err)
		}
	})
}

// keepDefaultDeadlines gives the server's default deadline to every value
// an agent staged that has none kept: one whose deadline a process that
// stopped between staging it and keeping its deadline did not write. It
// runs once at start; the deadline counts from when the value was staged.
func (s *Part) keepDefaultDeadlines(ctx context.Context) error {
	if s.Config.DecisionDeadline <= 0 {
		return nil
	}
	for _, snap := range s.controls.Proposals(ctx, "") {
		st := snap.State.Staged
		if st == nil || st.Provenance.Source != control.SourceAgent {
			continue
		}
		item := deadlineItem(snap.Identity, st.Revision)
		if _, err := s.Store.Deadlines.Deadline(ctx, store.DeadlineControlProposal, item); err == nil {
			continue
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err := s.Store.Deadlines.SetDeadline(ctx, store.DecisionDeadline{Kind: store.DeadlineControlProposal, Item: item,
			Due: st.StagedAt.Add(s.Config.DecisionDeadline), CreatedAt: st.StagedAt}); err != nil {
			return err
		}
	}
	return nil
}

// ExpireDue routes every staged value past its first deadline that names
// a group to escalate to, to that group, with as long again (once across
// nodes: a compare-and-set on the deadline's stage), and counts it; it
// discards every other staged value past its deadline that nobody
// decided, records it in the audit log (source deadline, reason "no
// decision before the deadline") and publishes it, so the agent waiting
// in inbox_wait hears it; it returns how many it discarded. The discard
// names the revision, so a value a person decided meanwhile, or that
// another node discarded first, is left as it is: each is discarded once.
func (s *Part) ExpireDue(ctx context.Context) (int, error) {
	if s.Store.Deadlines == nil {
		return 0, nil
	}
	n := 0
	for {
		due, err := s.Store.Deadlines.DueDeadlines(ctx, store.DeadlineControlProposal, s.Now(), 100)
		if err != nil {
			return n, err
		}
		if len(due) == 0 {
			return n, nil
		}
		open := map[string]control.Identity{}
		for _, snap := range s.controls.Proposals(ctx, "") {
			open[deadlineItem(snap.Identity, snap.State.Staged.Revision)] = snap.Identity
		}
		removed := 0
		for _, d := range due {
			id, ok := open[d.Item]
			if !ok && s.Now().Sub(d.Due) < unmatchedGrace {
				// This node's registry may not have heard yet of a value
				// another node staged: look again on the next sweeps.
				continue
			}
			if ok {
				rev, _ := strconv.ParseInt(d.Item[len(id.String())+1:], 10, 64)
				if d.EscalateTo != "" && d.Stage == 0 {
					err := s.Store.Deadlines.AdvanceDeadline(ctx, d.Kind, d.Item, 0, s.Now().Add(d.Due.Sub(d.CreatedAt)))
					switch {
					case err == nil:
						s.escalated(ctx, id, rev, d.EscalateTo)
						n++
					case !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrNotFound):
						return n, err
					}
					// Escalated now or by another node: it waits again.
					removed++
					continue
				}
				if s.discardAtDeadline(ctx, id, rev) {
					n++
				}
			}
			if err := s.Store.Deadlines.DeleteDeadline(ctx, d.Kind, d.Item); err != nil {
				return n, err
			}
			removed++
		}
		if len(due) < 100 || removed < len(due) {
			return n, nil
		}
	}
}

// escalated records in the audit log that revision rev of the control id
// was routed to group at its first deadline, and publishes it, so the
// agent waiting in inbox_wait hears it.
func (s *Part) escalated(ctx context.Context, id control.Identity, rev int64, group string) {
	snap, _ := s.controls.Get(ctx, id)
	by := ""
	if snap.State.Staged != nil {
		by = snap.State.Staged.Provenance.PrincipalID
	}
	rec := store.AuditRecord{Time: s.Now(), PrincipalID: by, Source: string(SourceDeadline), Subject: "control:" + deadlineItem(id, rev),
		Action: "control.escalate", OK: true, Reason: "escalated to group " + group + ": no decision before the first deadline"}
	if _, err := s.Store.AppendAudit(context.WithoutCancel(ctx), rec); err != nil {
		s.Log.Error("audit append failed", "control", id.String(), "action", "escalate", "err", err)
	}
	s.Log.Info("staged value escalated at its deadline", "control", id.String(), "revision", rev, "group", group)
	s.publishControl(id.FormID, "control.escalated", map[string]any{"identity": id, "revision": rev, "group": group, "origin": s.Origin})
}

// discardAtDeadline discards revision rev of the control id in no one's
// name and reports whether it did.
func (s *Part) discardAtDeadline(ctx context.Context, id control.Identity, rev int64) bool {
	cmd := control.Command{Action: control.Discard, Identity: id, Revision: rev}
	cc := control.CommandContext{Source: control.SourceUser, Confirmed: true}
	pa := &pendingAudit{cmd: cmd, cc: control.CommandContext{Source: SourceDeadline}, note: NoDecision}
	res := s.controls.Execute(context.WithValue(ctx, pendingAuditKey{}, pa), cmd, cc)
	if !res.OK {
		return false
	}
	if !pa.written {
		rec := s.auditRecord("", cmd, pa.cc, res)
		rec.Reason = NoDecision
		if _, err := s.Store.AppendAudit(context.WithoutCancel(ctx), rec); err != nil {
			s.Log.Error("audit append failed", "control", id.String(), "action", "discard", "err", err)
		}
	}
	s.publishControl(id.FormID, "control.command", &commandData{
		Action: control.Discard, Identity: id, OK: true, Source: SourceDeadline, Snapshot: &res.Snapshot, Origin: s.Origin,
	})
	return true
}
