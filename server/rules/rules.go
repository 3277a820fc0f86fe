package rules

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
	"github.com/assent-run/assent/wire"
)

// Audit actions of rules.
const (
	ActionCreate = "rule.create"
	ActionRevoke = "rule.revoke"
)

// Deps is what the rules part is built on. Every field is needed.
type Deps struct {
	Gate
	Store    Stores
	Controls Controls
	Log      *slog.Logger
	Now      func() time.Time
	// Web receives the part's page.
	Web *host.WebUI
}

// Gate is the part of the server's host the rules part calls.
type Gate interface {
	Authed(next http.Handler) http.Handler
	WebPage(h func(w http.ResponseWriter, r *http.Request, pg host.Page)) http.Handler
	SetNotice(w http.ResponseWriter, r *http.Request, msg string)
	TakeNotice(w http.ResponseWriter, r *http.Request) string
	PrincipalNames(ctx context.Context) map[string]string
}

// Stores are the stores the rules part reads and writes.
type Stores struct {
	Rules      store.Rules
	Principals store.Principals
	// Settings names the workspace's owner, who sees every rule.
	Settings store.Settings
}

// Controls is what the rules part asks of the controls part: whether a
// person may see (and so apply) a form's controls, and a control's
// snapshot as a person sees it.
type Controls interface {
	FormVisible(ctx context.Context, p store.Principal, formID string) bool
	Inspect(ctx context.Context, p store.Principal, id control.Identity) (control.Snapshot, *tool.Error)
}

func (d Deps) check() error {
	switch {
	case d.Gate == nil:
		return host.MissingDep("rules", "Gate")
	case d.Store.Rules == nil || d.Store.Principals == nil || d.Store.Settings == nil:
		return host.MissingDep("rules", "Store")
	case d.Controls == nil:
		return host.MissingDep("rules", "Controls")
	case d.Log == nil:
		return host.MissingDep("rules", "Log")
	case d.Now == nil:
		return host.MissingDep("rules", "Now")
	case d.Web == nil:
		return host.MissingDep("rules", "Web")
	}
	return nil
}

// Part is the standing rules part.
type Part struct {
	Deps
}

//go:embed templates/*.html
var templateFS embed.FS

// New builds the rules part on d.
func New(ctx context.Context, d Deps) (*Part, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	if err := d.Web.AddPages(templateFS, "templates/*.html"); err != nil {
		return nil, err
	}
	return &Part{Deps: d}, nil
}

// Name names the part.
func (p *Part) Name() string { return "rules" }

// Routes registers /v1/rules and the /rules page.
func (p *Part) Routes(mux *host.Mux) {
	mux.Handle("GET /v1/rules", p.Authed(personOnly(p.handleList)))
	mux.Handle("POST /v1/rules", p.Authed(personOnly(p.handleCreate)))
	mux.Handle("DELETE /v1/rules/{id}", p.Authed(personOnly(p.handleRevoke)))
	mux.Handle("GET /rules", p.WebPage(p.handlePage))
	mux.Handle("POST /rules/{id}/revoke", p.WebPage(p.handleWebRevoke))
}

// personOnly admits a person signed in to the web UI, as the inbox's JSON
// routes do; agents, services and tokens of any kind are refused.
func personOnly(h func(http.ResponseWriter, *http.Request, store.Principal)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := host.PrincipalOf(r)
		if p.Kind != store.KindHuman || !host.FromWeb(r) {
			host.WriteError(w, wire.HumanConfirmationRequired, "only a person signed in to the web UI makes or revokes standing rules; use the rules page, or its session cookie with the X-CSRF-Token header")
			return
		}
		h(w, r, p)
	})
}

// isOwner reports whether p is the workspace's owner.
func (p *Part) isOwner(ctx context.Context, who store.Principal) bool {
	owner, err := p.Store.Settings.Setting(ctx, auth.SettingOwner)
	return err == nil && who.ID == owner
}

// Prepare checks req as person's rule and returns the rule it makes,
// not yet saved. The agent must be an agent, the person must see the
// control, the bounds must be either values or a min and max, and until
// must be in the future, at most 90 days ahead.
func (p *Part) Prepare(ctx context.Context, person store.Principal, req api.RuleRequest) (store.Rule, *wire.Error) {
	now := p.Now().UTC()
	switch {
	case req.Agent == "":
		return store.Rule{}, wire.New(wire.InvalidRequest, `"agent" names the agent's principal id`)
	case req.Control == nil || req.Control.FormID == "" || req.Control.ControlID == "":
		return store.Rule{}, wire.New(wire.InvalidRequest, `"control" names the control: {"formId", "controlId"}`)
	case req.Until.IsZero():
		return store.Rule{}, wire.New(wire.InvalidRequest, `"until" is required: the time (RFC 3339) the rule ends, at most 90 days ahead`)
	case !req.Until.After(now):
		return store.Rule{}, wire.New(wire.InvalidRequest, `"until" is in the past; give a time ahead, at most 90 days`)
	case req.Until.Sub(now) > store.RuleMaxDuration:
		return store.Rule{}, wire.New(wire.InvalidRequest, `"until" is more than 90 days ahead; choose an earlier end and make the rule again then`)
	case len(req.Values) == 0 && req.Min == nil && req.Max == nil:
		return store.Rule{}, wire.New(wire.InvalidRequest, `give the allowed "values", or a "min" and/or "max" for a number`)
	case len(req.Values) > 0 && (req.Min != nil || req.Max != nil):
		return store.Rule{}, wire.New(wire.InvalidRequest, `give either "values" or "min"/"max", not both`)
	case len(req.Values) > store.RuleMaxValues:
		return store.Rule{}, wire.New(wire.LimitExceeded, fmt.Sprintf("a rule allows at most %d values", store.RuleMaxValues))
	case req.Min != nil && req.Max != nil && *req.Min > *req.Max:
		return store.Rule{}, wire.New(wire.InvalidRequest, `"min" is above "max"`)
	}
	for _, v := range req.Values {
		if len(v) > store.RuleMaxValueBytes {
			return store.Rule{}, wire.New(wire.LimitExceeded, fmt.Sprintf("each allowed value is at most %d bytes of JSON", store.RuleMaxValueBytes))
		}
	}
	agent, err := p.Store.Principals.Principal(ctx, req.Agent)
	if errors.Is(err, store.ErrNotFound) || err == nil && (agent.Kind != store.KindAgent || agent.Revoked) {
		return store.Rule{}, wire.New(wire.InvalidRequest, "no agent "+req.Agent+" can be given a rule; name an agent's principal id (assent token list)")
	}
	if err != nil {
		return store.Rule{}, storeError(err)
	}
	id := control.Identity{FormID: req.Control.FormID, ControlID: req.Control.ControlID}
	if s := req.Control.Subject; s != nil {
		id.Subject = &control.Subject{Type: s.Type, ID: s.ID}
	}
	if _, terr := p.Controls.Inspect(ctx, person, id); terr != nil {
		return store.Rule{}, wire.New(wire.NotFound, "you can see no control "+id.String()+"; a rule only lets through what you may apply yourself")
	}
	// Stores keep milliseconds: the rule starts at now's and ends no later
	// than asked, and never more than the longest a rule may last.
	created := now.Truncate(time.Millisecond)
	until := req.Until.UTC().Truncate(time.Millisecond)
	if longest := created.Add(store.RuleMaxDuration); until.After(longest) {
		until = longest
	}
	r := store.Rule{ID: auth.NewID("r_"), CreatedBy: person.ID, AgentID: agent.ID, FormID: id.FormID, ControlID: id.ControlID,
		Values: req.Values, Min: req.Min, Max: req.Max, Until: until, CreatedAt: created}
	if id.Subject != nil {
		r.SubjectType, r.SubjectID = id.Subject.Type, id.Subject.ID
	}
	if err := r.Check(); err != nil {
		return store.Rule{}, wire.New(wire.InvalidRequest, strings.TrimPrefix(err.Error(), store.ErrInvalid.Error()+": "))
	}
	return r, nil
}

// PrepareFromCard is Prepare for a rule made from an inbox card that
// agent filed about target: the agent and control are the card's (a
// request that names others is refused), and without bounds the card's
// value is the one value allowed.
func (p *Part) PrepareFromCard(ctx context.Context, person store.Principal, agent string, target *host.RuleTarget, req api.RuleRequest) (store.Rule, *wire.Error) {
	if target == nil {
		return store.Rule{}, wire.New(wire.InvalidRequest, "a standing rule is made from a control proposal's card; this item offers none")
	}
	if req.Agent != "" && req.Agent != agent {
		return store.Rule{}, wire.New(wire.InvalidRequest, "the rule's agent is the one that proposed this item; leave out \"agent\"")
	}
	c := &api.RuleControl{FormID: target.FormID, ControlID: target.ControlID}
	if target.SubjectType != "" || target.SubjectID != "" {
		c.Subject = &api.RuleSubject{Type: target.SubjectType, ID: target.SubjectID}
	}
	if req.Control != nil && !sameControl(req.Control, c) {
		return store.Rule{}, wire.New(wire.InvalidRequest, "the rule's control is this item's; leave out \"control\"")
	}
	req.Agent, req.Control = agent, c
	if len(req.Values) == 0 && req.Min == nil && req.Max == nil {
		req.Values = []json.RawMessage{target.Value}
	}
	return p.Prepare(ctx, person, req)
}

func sameControl(a, b *api.RuleControl) bool {
	if a.FormID != b.FormID || a.ControlID != b.ControlID || (a.Subject == nil) != (b.Subject == nil) {
		return false
	}
	return a.Subject == nil || *a.Subject == *b.Subject
}

// Save stores r, prepared for person, with its audit record.
func (p *Part) Save(ctx context.Context, person store.Principal, r store.Rule) *wire.Error {
	if err := p.Store.Rules.CreateRule(ctx, r, p.auditRecord(person.ID, ActionCreate, r)); err != nil {
		p.Log.Error("rule could not be saved", "rule", r.ID, "err", err)
		return storeError(err)
	}
	return nil
}

// auditRecord is the audit record of person's action on r.
func (p *Part) auditRecord(personID, action string, r store.Rule) store.AuditRecord {
	detail, _ := json.Marshal(map[string]any{"rule": r.ID, "agent": r.AgentID, "until": r.Until, "allows": Describe(r)})
	rec := store.AuditRecord{Time: p.Now(), PrincipalID: personID, Source: string(control.SourceUser),
		FormID: r.FormID, ControlID: r.ControlID, Action: action, OK: true, Detail: string(detail)}
	if r.SubjectType != "" {
		rec.Subject = r.SubjectType + ":" + r.SubjectID
	}
	return rec
}

// storeError is the wire form of a store's failure.
func storeError(err error) *wire.Error {
	if store.Unavailable(err) {
		return wire.New(wire.StoreUnavailable, "the rules could not be saved or read just now; try again")
	}
	return wire.New(wire.Internal, host.InternalMessage)
}

// List returns the rules person may see: their own, or every rule for
// the workspace's owner; newest first.
func (p *Part) List(ctx context.Context, person store.Principal) ([]store.Rule, error) {
	f := store.RuleFilter{CreatedBy: person.ID}
	if p.isOwner(ctx, person) {
		f.CreatedBy = ""
	}
	rs, err := p.Store.Rules.ListRules(ctx, f)
	slices.Reverse(rs)
	return rs, err
}

// Revoke revokes the rule id for person, who made it or owns the
// workspace; to anyone else it does not exist.
func (p *Part) Revoke(ctx context.Context, person store.Principal, id string) (store.Rule, *wire.Error) {
	r, err := p.Store.Rules.Rule(ctx, id)
	if errors.Is(err, store.ErrNotFound) || err == nil && r.CreatedBy != person.ID && !p.isOwner(ctx, person) {
		return store.Rule{}, wire.New(wire.NotFound, "you have no rule "+id+"; list yours with GET /v1/rules")
	}
	if err != nil {
		return store.Rule{}, storeError(err)
	}
	at := p.Now().UTC().Truncate(time.Millisecond)
	if err := p.Store.Rules.RevokeRule(ctx, id, person.ID, at, p.auditRecord(person.ID, ActionRevoke, r)); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return store.Rule{}, wire.New(wire.Conflict, "rule "+id+" is revoked already")
		}
		return store.Rule{}, storeError(err)
	}
	r.RevokedAt, r.RevokedBy = at, person.ID
	return r, nil
}

// Covering implements the controls part's Standing: the first live rule
// for agent on id that allows value, whose creator is still a person who
// may apply it — not revoked, and able to see the control's form, as the
// apply path requires. A rule never lets through more than its creator
// could do now.
func (p *Part) Covering(ctx context.Context, agent store.Principal, id control.Identity, value json.RawMessage) (string, store.Principal, bool) {
	now := p.Now()
	rs, err := p.Store.Rules.ListRules(ctx, store.RuleFilter{AgentID: agent.ID, LiveAt: now})
	if err != nil {
		p.Log.Error("standing rules could not be read; the value waits for a person", "err", err)
		return "", store.Principal{}, false
	}
	st, sid := "", ""
	if id.Subject != nil {
		st, sid = id.Subject.Type, id.Subject.ID
	}
	for _, r := range rs {
		if r.FormID != id.FormID || r.ControlID != id.ControlID || r.SubjectType != st || r.SubjectID != sid ||
			!r.Live(now) || !r.Allows(value) {
			continue
		}
		person, err := p.Store.Principals.Principal(ctx, r.CreatedBy)
		if err != nil || person.Kind != store.KindHuman || person.Revoked || !p.Controls.FormVisible(ctx, person, id.FormID) {
			continue
		}
		return r.ID, person, true
	}
	return "", store.Principal{}, false
}

// Describe says what r allows, in a person's words: "one of …" or a range.
func Describe(r store.Rule) string {
	if len(r.Values) > 0 {
		vs := make([]string, len(r.Values))
		for i, v := range r.Values {
			var x any
			if json.Unmarshal(v, &x) == nil {
				vs[i] = host.DisplayValue(x, false)
			} else {
				vs[i] = string(v)
			}
		}
		if len(vs) == 1 {
			return vs[0]
		}
		return "one of " + strings.Join(vs, ", ")
	}
	num := func(f float64) string { return host.DisplayValue(f, false) }
	switch {
	case r.Min != nil && r.Max != nil:
		return "from " + num(*r.Min) + " to " + num(*r.Max)
	case r.Min != nil:
		return "at least " + num(*r.Min)
	default:
		return "at most " + num(*r.Max)
	}
}

func (p *Part) view(r store.Rule) api.RuleView {
	return api.RuleView{Rule: r, Live: r.Live(p.Now())}
}

func (p *Part) handleList(w http.ResponseWriter, r *http.Request, person store.Principal) {
	rs, err := p.List(r.Context(), person)
	if err != nil {
		host.WriteAPIError(w, storeError(err))
		return
	}
	out := api.RuleList{Rules: make([]api.RuleView, 0, len(rs))}
	for _, rule := range rs {
		out.Rules = append(out.Rules, p.view(rule))
	}
	host.WriteJSON(w, http.StatusOK, out)
}

func (p *Part) handleCreate(w http.ResponseWriter, r *http.Request, person store.Principal) {
	var req api.RuleRequest
	if !host.DecodeJSON(w, r, 64<<10, &req) {
		return
	}
	rule, werr := p.Prepare(r.Context(), person, req)
	if werr == nil {
		werr = p.Save(r.Context(), person, rule)
	}
	if werr != nil {
		host.WriteAPIError(w, werr)
		return
	}
	host.WriteJSON(w, http.StatusCreated, p.view(rule))
}

func (p *Part) handleRevoke(w http.ResponseWriter, r *http.Request, person store.Principal) {
	rule, werr := p.Revoke(r.Context(), person, r.PathValue("id"))
	if werr != nil {
		host.WriteAPIError(w, werr)
		return
	}
	host.WriteJSON(w, http.StatusOK, p.view(rule))
}
