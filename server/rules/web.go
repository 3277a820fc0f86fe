package rules

import (
	"net/http"
	"time"

	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
)

// ruleRow is one rule as the rules page shows it.
type ruleRow struct {
	ID string
	// Summary is the rule in a person's words, also the Revoke button's
	// accessible name.
	Summary string
	Agent   string
	Control string
	Allows  string
	Until   string
	By      string
	Status  string
	Live    bool
}

// rulesPage is the data of the rules page.
type rulesPage struct {
	Rules  []ruleRow
	Notice string
	Owner  bool
}

func (p *Part) handlePage(w http.ResponseWriter, r *http.Request, pg host.Page) {
	ctx := r.Context()
	if pg.Principal.Kind != store.KindHuman {
		http.Error(w, "standing rules are a person's", http.StatusForbidden)
		return
	}
	data := rulesPage{Notice: p.TakeNotice(w, r), Owner: p.isOwner(ctx, *pg.Principal)}
	rs, err := p.List(ctx, *pg.Principal)
	if err != nil {
		p.Log.Error("rules page", "err", err)
	}
	names := p.PrincipalNames(ctx)
	now := p.Now()
	for _, rule := range rs {
		row := ruleRow{ID: rule.ID, Agent: host.NameOr(names, rule.AgentID), Control: controlText(rule), Allows: Describe(rule),
			Until: rule.Until.UTC().Format(time.RFC3339), By: host.NameOr(names, rule.CreatedBy), Live: rule.Live(now)}
		switch {
		case !rule.RevokedAt.IsZero():
			row.Status = "Revoked by " + host.NameOr(names, rule.RevokedBy)
		case !row.Live:
			row.Status = "Expired"
		default:
			row.Status = "Active"
		}
		row.Summary = "Let " + row.Agent + " set " + row.Control + " to " + row.Allows
		data.Rules = append(data.Rules, row)
	}
	pg.Title, pg.Data = "Standing rules", data
	p.Web.Render(w, http.StatusOK, "rules", pg)
}

// controlText names a rule's control for a person: form / control, and
// the record it is about.
func controlText(r store.Rule) string {
	s := r.FormID + " / " + r.ControlID
	if r.SubjectType != "" {
		s += " (" + r.SubjectType + " " + r.SubjectID + ")"
	}
	return s
}

func (p *Part) handleWebRevoke(w http.ResponseWriter, r *http.Request, pg host.Page) {
	if pg.Principal.Kind != store.KindHuman {
		http.Error(w, "standing rules are a person's", http.StatusForbidden)
		return
	}
	rule, werr := p.Revoke(r.Context(), *pg.Principal, r.PathValue("id"))
	if werr != nil {
		p.SetNotice(w, r, "Not revoked: "+werr.Message+".")
	} else {
		p.SetNotice(w, r, "Revoked: the agent's next change to "+controlText(rule)+" waits for a person again.")
	}
	http.Redirect(w, r, "/rules", http.StatusSeeOther)
}
