package screens

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/assent-run/assent/screen/render"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
	"github.com/assent-run/assent/wire"
)

// A press filed from a screen view waits for a person where they look for
// decisions: the inbox lists it with the app's sentence, the screen and the
// agent, and the person confirms or declines it there, as on the screen's
// page. The agent that showed the screen learns the outcome through
// inbox_wait, naming the screen.

// Outcomes of a press filed from a view, as PressOutcome reports them.
const (
	PressPending   = "pending"
	PressConfirmed = "approved"
	PressDeclined  = "declined"
	PressFailed    = "failed"
	PressNotFound  = "not_found"
)

// viewPresses remembers the last press filed from a view on each screen,
// and what became of it.
type viewPresses struct {
	mu sync.Mutex
	m  map[string]*viewPressState // by screen id
}

type viewPressState struct {
	press  string
	status string
	by     string
	at     time.Time
}

// maxRememberedPresses bounds the outcomes kept; the oldest go first.
const maxRememberedPresses = 1000

// outcomes returns the part's record of view presses.
func (s *Part) outcomes() *viewPresses {
	v := &s.viewPresses
	v.mu.Lock()
	if v.m == nil {
		v.m = map[string]*viewPressState{}
	}
	v.mu.Unlock()
	return v
}

// noteViewPress records that press waits on screen.
func (s *Part) noteViewPress(screen, press string) {
	v := s.outcomes()
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.m) >= maxRememberedPresses {
		var oldest string
		for k, st := range v.m {
			if oldest == "" || st.at.Before(v.m[oldest].at) {
				oldest = k
			}
		}
		delete(v.m, oldest)
	}
	v.m[screen] = &viewPressState{press: press, status: PressPending, at: s.Now()}
}

// decideViewPress records what became of press on screen, if it is the
// view press remembered there.
func (s *Part) decideViewPress(screen, press, status, by string) bool {
	v := s.outcomes()
	v.mu.Lock()
	defer v.mu.Unlock()
	st := v.m[screen]
	if st == nil || st.press != press || st.status != PressPending {
		return false
	}
	st.status, st.by, st.at = status, by, s.Now()
	return true
}

// PressOutcome reports to p what became of the last press filed from a
// view on the screen id: pending (none filed yet, or one waits for a
// person), approved (confirmed; the tool ran), failed (confirmed; the tool
// failed), declined, or not_found (no such screen of p's).
func (s *Part) PressOutcome(ctx context.Context, p store.Principal, id string) (status, press, by string) {
	if _, ok := s.screenFor(ctx, p, id); !ok {
		return PressNotFound, "", ""
	}
	v := s.outcomes()
	v.mu.Lock()
	defer v.mu.Unlock()
	st := v.m[id]
	if st == nil {
		return PressPending, "", ""
	}
	return st.status, st.press, st.by
}

// Inbox lists the presses waiting for a person's confirmation on the
// screens p sees, each with the app's sentence, the screen and the agent
// that showed it.
func (s *Part) Inbox(ctx context.Context, p store.Principal) ([]host.InboxSection, error) {
	if p.Kind != store.KindHuman {
		return nil, nil
	}
	type waiting struct {
		screen, title, owner, press, sentence, tool, button string
		at                                                  time.Time
	}
	var all []waiting
	for _, sc := range s.visibleScreens(ctx, p) {
		sc.mu.RLock()
		if !sc.closed && len(sc.presses) > 0 {
			title := render.Title(sc.doc)
			for id, pp := range sc.presses {
				label := pp.button
				if n := sc.doc.Node(pp.button); n != nil {
					if l, ok := n.Props["label"].(string); ok && strings.TrimSpace(l) != "" {
						label = l
					}
				}
				// The inbox shows no field of the page, so its sentence
				// names every value the press sends.
				all = append(all, waiting{screen: sc.id, title: title, owner: sc.owner.ID, press: id, sentence: s.pressQuestionLocked(sc, pp, false), tool: pp.tool, button: label, at: pp.created})
			}
		}
		sc.mu.RUnlock()
	}
	if len(all) == 0 {
		return nil, nil
	}
	slices.SortFunc(all, func(a, b waiting) int { return a.at.Compare(b.at) })
	names := s.PrincipalNames(ctx)
	sec := host.InboxSection{ID: "screen-presses", Title: "Actions to confirm", Empty: "No actions wait for your confirmation."}
	for _, wt := range all {
		base := "/web/screens/" + url.PathEscape(wt.screen) + "/presses/" + url.PathEscape(wt.press) + "/"
		sec.Items = append(sec.Items, host.InboxItem{
			Summary: wt.sentence,
			Title:   "Pressed " + wt.button + " on a screen",
			Fields: []host.InboxField{
				{Label: "Screen", Value: wt.title},
				{Label: "Agent", Value: host.NameOr(names, wt.owner)},
				host.InboxTime("When", wt.at),
			},
			Details: []host.InboxField{{Label: "Tool", Value: wt.tool}, {Label: "Screen id", Value: wt.screen}},
			Link:    "/screens/" + url.PathEscape(wt.screen) + "?press=" + url.QueryEscape(wt.press), LinkLabel: "Open the screen",
			Actions: []host.InboxAction{
				{Label: "Confirm", URL: base + "confirm", Primary: true},
				{Label: "Decline", URL: base + "decline"},
			},
			Decision: s.pressDecision(wt.screen, wt.press, wt.owner, wt.sentence, wt.tool),
		})
	}
	return []host.InboxSection{sec}, nil
}

// handleInboxPress is a person's Confirm or Decline of a press in the
// inbox: the same answer as on the screen's page, then back to the inbox.
func (s *Part) handleInboxPress(w http.ResponseWriter, r *http.Request, pg host.Page) {
	decision := r.PathValue("decision")
	if decision != "confirm" && decision != "decline" {
		host.WriteError(w, "not_found", "a press can be confirmed or declined")
		return
	}
	notice, err := s.answerInboxPress(r.Context(), *pg.Principal, r.PathValue("id"), r.PathValue("press"), decision == "confirm")
	status := ""
	if err != nil {
		var te *tool.Error
		if errors.As(err, &te) {
			notice = te.Message
		} else {
			notice = "That press could not be answered; open the screen and try again."
		}
	}
	if r.Header.Get("Accept") == "application/json" {
		if err == nil {
			status = "done"
			if decision == "decline" {
				status = "cancelled"
			}
		}
		host.WriteJSON(w, http.StatusOK, map[string]any{"status": status, "message": notice})
		return
	}
	s.SetNotice(w, r, notice)
	http.Redirect(w, r, host.SafeBack(r.PostFormValue("back"), "/inbox"), http.StatusSeeOther)
}

// answerInboxPress answers a press from the inbox and says what became of
// it in a sentence; a press that could not run is an error.
func (s *Part) answerInboxPress(ctx context.Context, p store.Principal, screen, press string, confirm bool) (string, error) {
	res, err := s.AnswerPress(ctx, p, screen, press, confirm)
	if err != nil {
		return "", err
	}
	switch res.Status {
	case "done":
		return "Confirmed: the action ran.", nil
	case "cancelled":
		return "Declined: nothing was run.", nil
	case "failed":
		return "", tool.Errorf(string(wire.ToolFailed), "%s", res.Message)
	}
	return "", tool.Errorf(string(wire.Conflict), "%s", res.Message)
}

// pressDecision makes a press's card decidable through the inbox API.
func (s *Part) pressDecision(screen, press, owner, sentence, toolName string) *host.Decision {
	return &host.Decision{
		Key: "screen_press:" + screen + "/" + press, Binding: "pending", Kind: "screen_press",
		Bound:      map[string]string{"screen": screen, "press": press, "tool": toolName, "sentence": sentence},
		ProposedBy: owner,
		Decide: func(ctx context.Context, p store.Principal, d host.DecideArgs) (string, error) {
			return s.answerInboxPress(ctx, p, screen, press, d.Approve)
		},
	}
}

// CountOpen counts the presses waiting for a person's confirmation: for a
// person, on the screens they see, routed to them (the inbox cards); for
// an agent, on the screens it showed.
func (s *Part) CountOpen(ctx context.Context, p store.Principal) map[string]int {
	n := 0
	var filed []host.Filed
	for _, sc := range s.visibleScreens(ctx, p) {
		sc.mu.RLock()
		if !sc.closed {
			n += len(sc.presses)
			if p.Kind == store.KindHuman {
				for range sc.presses {
					filed = append(filed, host.Filed{By: sc.owner.ID})
				}
			}
		}
		sc.mu.RUnlock()
	}
	if p.Kind == store.KindHuman {
		n = s.CountRouted(ctx, p, filed)
	}
	return map[string]int{"screen_presses": n}
}
