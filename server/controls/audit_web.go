package controls

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
)

// The audit page: the control commands a person may see (their own, their
// supervised agents', and those on forms everyone sees), newest first.

// auditPageSize is how many records the audit page shows at most.
const auditPageSize = 200

// auditScanBatch is how many records one read of the audit log returns
// while the page looks for the newest ones.
const auditScanBatch = store.AuditListMax

// auditDetail is the Detail of a command's audit record: the value the
// command carried, unless the control's value is redacted, and the owner
// of the form when the form is private, so who may read the record is
// known after the form is gone. Values are never kept for a control the
// registry could not describe.
func (s *Part) auditDetail(cmd control.Command, res control.Result, rule string) string {
	return s.commandDetail(cmd, !res.Snapshot.IsZero() && !res.Snapshot.State.ValueRedacted, rule)
}

// commandDetail is the Detail of a command's audit record, carrying the
// command's value when showValue is set.
func (s *Part) commandDetail(cmd control.Command, showValue bool, rule string) string {
	d := map[string]any{}
	if cmd.Value != nil && showValue {
		d["value"] = cmd.Value
		// The unit (a currency) is kept with the value, so the audit page
		// shows "1250 EUR" after the form is gone too.
		if s.controls != nil {
			if snap, ok := s.controls.Get(context.Background(), cmd.Identity); ok && snap.Metadata.Unit != "" {
				d["unit"] = snap.Metadata.Unit
			}
		}
	}
	if rule != "" {
		d["rule"] = rule
	}
	s.formsMu.Lock()
	if f, ok := s.forms[cmd.Identity.FormID]; ok && f.private {
		d["formOwner"] = f.owner
	}
	s.formsMu.Unlock()
	b, err := json.Marshal(d)
	if err == nil && len(b) > 4096 {
		delete(d, "value")
		delete(d, "unit")
		b, err = json.Marshal(d)
	}
	if err != nil || len(d) == 0 {
		return ""
	}
	return string(b)
}

// auditFacts is what the audit page reads from a record's Detail.
type auditFacts struct {
	Value     any     `json:"value"`
	Unit      string  `json:"unit"`
	FormOwner *string `json:"formOwner"`
	// Rule is the standing rule under which the command ran, or which the
	// record creates or revokes.
	Rule string `json:"rule"`
}

func parseAuditDetail(detail string) (auditFacts, bool) {
	var f auditFacts
	if detail == "" || json.Unmarshal([]byte(detail), &f) != nil {
		return auditFacts{}, false
	}
	return f, true
}

// auditVisible reports whether p may read rec. seen holds the principals
// p oversees (see overseenBy). A record is visible when its actor is one
// of them; otherwise only when it is about a control p may see: on a
// private form, one whose owner p oversees; on any other form, always.
// Records about no control (for example a person's decision on a Run
// proposal) are visible to their actor's overseers only.
func (s *Part) auditVisible(ctx context.Context, p store.Principal, rec store.AuditRecord, seen map[string]bool) bool {
	if seen[rec.PrincipalID] {
		return true
	}
	if f, ok := parseAuditDetail(rec.Detail); ok && f.FormOwner != nil {
		return seen[*f.FormOwner] || s.Oversees(ctx, p, *f.FormOwner)
	}
	return rec.FormID != "" && s.FormVisible(ctx, p, rec.FormID)
}

// auditRow is one line of the audit page.
type auditRow struct {
	Seq                   int64
	Time                  string
	Who, Source           string
	Form, Control, Object string
	Command               string
	OK                    bool
	Outcome               string
	Value                 string
	Undo                  bool
}

// auditOption is one choice of a filter on the audit page.
type auditOption struct {
	Value, Label string
	Selected     bool
}

// auditPage is the data of the audit page.
type auditPage struct {
	Rows     []auditRow
	Forms    []auditOption
	Actors   []auditOption
	Form     string
	Actor    string
	Filtered bool
	// More is set when older records were left out.
	More bool
}

// handleAuditPage serves GET /audit, filtered by ?form= and ?who= (a
// principal id).
func (s *Part) handleAuditPage(w http.ResponseWriter, r *http.Request, pg host.Page) {
	ctx := r.Context()
	p := *pg.Principal
	q := r.URL.Query()
	data := auditPage{Form: q.Get("form"), Actor: q.Get("who")}
	data.Filtered = data.Form != "" || data.Actor != ""
	pg.Title = "Audit"
	seen, names, err := s.OverseenBy(ctx, p)
	if err != nil {
		s.Log.Error("audit page", "err", err)
		pg.Data = data
		s.Web.Render(w, http.StatusServiceUnavailable, "audit", pg)
		return
	}
	recs, forms, actors, more, err := s.newestAudit(ctx, p, seen, data.Form, data.Actor)
	if err != nil {
		s.Log.Error("audit page", "err", err)
	}
	data.More = more
	for i := len(recs) - 1; i >= 0; i-- {
		data.Rows = append(data.Rows, auditRowOf(recs[i], names))
	}
	data.Forms = append(data.Forms, auditOption{Value: "", Label: "Every form", Selected: data.Form == ""})
	for _, f := range slices.Sorted(maps.Keys(forms)) {
		data.Forms = append(data.Forms, auditOption{Value: f, Label: f, Selected: f == data.Form})
	}
	data.Actors = append(data.Actors, auditOption{Value: "", Label: "Anyone", Selected: data.Actor == ""})
	ids := slices.SortedFunc(maps.Keys(actors), func(a, b string) int {
		return strings.Compare(host.NameOr(names, a)+"\x00"+a, host.NameOr(names, b)+"\x00"+b)
	})
	for _, id := range ids {
		label := host.NameOr(names, id)
		if id == p.ID {
			label += " (you)"
		}
		data.Actors = append(data.Actors, auditOption{Value: id, Label: label, Selected: id == data.Actor})
	}
	pg.Data = data
	if q.Get("partial") == "1" {
		s.Web.RenderPartial(w, "audit", "audit-list", pg)
		return
	}
	s.Web.Render(w, http.StatusOK, "audit", pg)
}

// newestAudit reads the audit log and returns the newest auditPageSize
// records p may see that match the filters, oldest first, with the forms
// and actors of every visible record (for the filter choices) and whether
// older matching records were left out.
func (s *Part) newestAudit(ctx context.Context, p store.Principal, seen map[string]bool, form, actor string) (recs []store.AuditRecord, forms, actors map[string]bool, more bool, err error) {
	forms, actors = map[string]bool{}, map[string]bool{}
	var after int64
	for {
		batch, err := s.Store.ListAudit(ctx, store.AuditFilter{AfterSeq: after, Limit: auditScanBatch})
		if err != nil {
			return recs, forms, actors, more, err
		}
		for _, rec := range batch {
			if !s.auditVisible(ctx, p, rec, seen) {
				continue
			}
			if rec.FormID != "" {
				forms[rec.FormID] = true
			}
			actors[rec.PrincipalID] = true
			if form != "" && rec.FormID != form || actor != "" && rec.PrincipalID != actor {
				continue
			}
			recs = append(recs, rec)
			if len(recs) > auditPageSize {
				recs, more = recs[1:], true
			}
		}
		if len(batch) < auditScanBatch {
			return slices.Clip(recs), forms, actors, more, nil
		}
		after = batch[len(batch)-1].Seq
	}
}

// auditRowOf describes rec for people. The value shown is the one the
// record kept, which is never a redacted control's.
func auditRowOf(rec store.AuditRecord, names map[string]string) auditRow {
	row := auditRow{
		Seq: rec.Seq, Time: rec.Time.UTC().Format(time.RFC3339),
		Who: host.NameOr(names, rec.PrincipalID), Source: rec.Source,
		Form: rec.FormID, Control: rec.ControlID, Object: rec.Subject,
		Command: rec.Action, OK: rec.OK, Undo: rec.Action == string(control.Undo),
	}
	if rec.FormID != "" {
		// The subject of a control is part of its identity; anything else
		// (a proposal, a tool) is what the record is about.
		row.Object = ""
		if rec.Subject != "" {
			row.Control += " (" + rec.Subject + ")"
		}
	}
	switch {
	case rec.OK:
		row.Outcome = "done"
	case rec.Reason != "":
		row.Outcome = "refused: " + rec.Reason
	default:
		row.Outcome = "refused"
	}
	f, ok := parseAuditDetail(rec.Detail)
	if ok && f.Value != nil {
		row.Value = host.DisplayValue(f.Value, false)
		if f.Unit != "" {
			row.Value += " " + f.Unit
		}
	}
	if ok && f.Rule != "" && rec.OK && rec.Action == string(control.Apply) {
		row.Outcome = "done, applied under rule " + f.Rule
	}
	return row
}
