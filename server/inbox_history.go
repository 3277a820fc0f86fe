package server

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// proposalHistory follows control proposals through the command events on
// the bus: who staged each revision and what became of it.
type proposalHistory struct {
	// staged is the open revision of each control.
	staged map[control.Key]int64
	revs   map[int64]*revHistory
}

type revHistory struct {
	key    control.Key
	stager string
	status string
	by     string
	// value is the staged value as JSON (empty when hidden).
	value json.RawMessage
	// replacedBy is the revision another principal staged over this one.
	replacedBy int64
	// changed says, for a proposal a person edited before applying it,
	// what the person changed.
	changed []string
}

func newProposalHistory() *proposalHistory {
	return &proposalHistory{staged: map[control.Key]int64{}, revs: map[int64]*revHistory{}}
}

// commandEvent is the part of a "control.command" event the history reads.
type commandEvent struct {
	Action      control.Action   `json:"action"`
	Identity    control.Identity `json:"identity"`
	OK          bool             `json:"ok"`
	PrincipalID string           `json:"principalId"`
	Snapshot    struct {
		State struct {
			Staged      *control.Proposal `json:"staged"`
			StagedValue json.RawMessage   `json:"stagedValue"`
		} `json:"state"`
	} `json:"snapshot"`
}

// observe records what a successful command event visible to p did to
// proposals.
func (h *proposalHistory) observe(p store.Principal, e event.Event) {
	if e.Type != "control.command" || !e.VisibleTo(p.ID, p.Kind == store.KindHuman) {
		return
	}
	var c commandEvent
	if json.Unmarshal(e.Data, &c) != nil || !c.OK {
		return
	}
	k := c.Identity.Key()
	// settle decides the open revision of k, and the proposals it
	// replaced on their stagers' behalf: applied by the person who staged
	// the replacement is "approved with changes", anything else ends them
	// as status does (a stale replacement leaves them stale).
	settle := func(status string) {
		rev, ok := h.staged[k]
		if !ok {
			return
		}
		delete(h.staged, k)
		r := h.revs[rev]
		if r == nil || r.status != outcomePending {
			return
		}
		r.status, r.by = status, c.PrincipalID
		for _, old := range h.revs {
			if old.replacedBy != rev || old.status != outcomePending {
				continue
			}
			old.status, old.by = status, c.PrincipalID
			if status == outcomeApplied && r.stager == c.PrincipalID {
				old.changed = []string{fmt.Sprintf("value: proposed %s, applied %s", shownJSON(old.value), shownJSON(r.value))}
			} else if status == outcomeApplied {
				old.status = outcomeStale
			}
		}
	}
	switch c.Action {
	case control.Stage:
		st := c.Snapshot.State.Staged
		if st == nil {
			return
		}
		if old := h.revs[h.staged[k]]; old != nil && old.status == outcomePending && old.replacedBy == 0 && old.stager != st.Provenance.PrincipalID && st.Provenance.Source == control.SourceUser {
			// Another principal's value over this one (a person's edit):
			// what becomes of it decides this one.
			old.replacedBy = st.Revision
			delete(h.staged, k)
		} else {
			settle(outcomeStale)
		}
		h.staged[k] = st.Revision
		if len(h.revs) < 4*waitReplay {
			h.revs[st.Revision] = &revHistory{key: k, stager: st.Provenance.PrincipalID, status: outcomePending, value: c.Snapshot.State.StagedValue}
		}
	case control.Apply:
		settle(outcomeApplied)
	case control.Discard, control.Clear:
		settle(outcomeDiscarded)
	}
}

// shownJSON is a value as the agent reads it in a change, or "(hidden)".
func shownJSON(v json.RawMessage) string {
	if len(v) == 0 {
		return "(hidden)"
	}
	return string(v)
}

// newest returns the newest revision principal staged on k, or 0.
func (h *proposalHistory) newest(k control.Key, principal string) int64 {
	var best int64
	for rev, r := range h.revs {
		if r.key == k && r.stager == principal && rev > best {
			best = rev
		}
	}
	return best
}

// progressFunc reports that done of total items are decided.
type progressFunc func(ctx context.Context, done, total int)

type progressKey struct{}

// withProgress returns ctx carrying a progressFunc that sends MCP progress
// notifications for req, when its client asked for them with a progress
// token.
func withProgress(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	if req == nil || req.Session == nil || req.Params == nil {
		return ctx
	}
	token := req.Params.GetProgressToken()
	if token == nil {
		return ctx
	}
	session := req.Session
	return context.WithValue(ctx, progressKey{}, progressFunc(func(ctx context.Context, done, total int) {
		_ = session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token,
			Progress: float64(done), Total: float64(total), Message: fmt.Sprintf("%d of %d decided", done, total)})
	}))
}

// progressOf returns the progressFunc of ctx, or nil.
func progressOf(ctx context.Context) progressFunc {
	f, _ := ctx.Value(progressKey{}).(progressFunc)
	return f
}

// checkWaitItems refuses a list that is empty, too long, or has an item
// that does not name exactly one thing.
func checkWaitItems(items []waitItem) error {
	if len(items) == 0 || len(items) > waitMaxItems {
		return tool.Errorf("invalid_request", "items must list 1 to %d things to wait for", waitMaxItems)
	}
	for i, it := range items {
		n := 0
		if it.Proposal != nil {
			n++
			if err := it.Proposal.Validate(); err != nil {
				return tool.Errorf("invalid_request", "items[%d].proposal: %v", i, err)
			}
		}
		if it.Approval != "" {
			n++
		}
		if it.CommandProposal != "" {
			n++
		}
		if it.Screen != "" {
			n++
		}
		if it.Program != "" {
			n++
		}
		if n != 1 {
			return tool.Errorf("invalid_request", "items[%d] must name exactly one of proposal, approval, command_proposal, screen or program", i)
		}
		if it.Revision < 0 || it.Revision != 0 && it.Proposal == nil {
			return tool.Errorf("invalid_request", "items[%d]: revision is a positive number and goes with a proposal", i)
		}
	}
	return nil
}
