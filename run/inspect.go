package run

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/assent-run/assent/store"
)

// Inspection bounds.
const (
	defaultInspectLines = 40
	maxInspectLines     = 200
	recentControls      = 20
	triageListMax       = 40
	previewChars        = 160
	bodyPreviewChars    = 320
	staleControlAfter   = 5 * time.Minute
)

// InspectRequest selects an inspection view.
type InspectRequest struct {
	Target string `json:"target"`
	View   string `json:"view"`
	Lines  int    `json:"lines,omitempty"`
	Status string `json:"status,omitempty"`
	Source string `json:"source,omitempty"`
}

// Inspect answers one view: runtime status|runs|triage, run:<id>
// status|recipe|trace|control, recipes summary|status, tool:<name>
// status|schema (tool views are answered by Tools' registry, see
// ToolSet). Run views are owner-only.
func (m *Manager) Inspect(ctx context.Context, ownerID string, req InspectRequest) (map[string]any, error) {
	target := strings.TrimSpace(req.Target)
	view := strings.TrimSpace(req.View)
	switch {
	case target == "runtime":
		switch view {
		case "status":
			return map[string]any{"run_root": m.runsDir(), "state_schema": StateSchema, "version": m.cfg.Version, "automatic_review": false}, nil
		case "runs":
			runs, err := m.List(ctx, ownerID, req.Status)
			if err != nil {
				return nil, err
			}
			return map[string]any{"owner_session": ownerID, "runs": runs}, nil
		case "triage":
			return m.triage(ctx, ownerID)
		}
		return nil, errorf(CodeInvalidRequest, "inspect runtime supports view=status, view=runs, or view=triage.")
	case target == "recipes":
		switch view {
		case "summary", "status":
			return m.recipesSummary(), nil
		}
		return nil, errorf(CodeInvalidRequest, "inspect recipes supports view=status or view=summary.")
	case strings.HasPrefix(target, "run:"):
		id, err := ParseTarget(target)
		if err != nil {
			return nil, err
		}
		r, err := m.owned(ctx, ownerID, id)
		if err != nil {
			return nil, err
		}
		switch view {
		case "status":
			return m.view(r), nil
		case "recipe":
			return m.recipeView(r), nil
		case "trace":
			return m.traceView(ctx, r, req.Source, req.Lines)
		case "control":
			return m.controlView(ctx, r, req.Lines)
		}
		return nil, errorf(CodeInvalidRequest, "inspect run:<id> supports view=status, view=recipe, view=trace, or view=control.")
	}
	return nil, errorf(CodeInvalidRequest, "unsupported inspect target: %s; use run:<id>, runtime, recipes, or tool:<name>", target)
}

func (m *Manager) recipeView(r store.RunRecord) map[string]any {
	d := decodeDoc(r)
	var def any
	_ = json.Unmarshal(d.Definition, &def)
	maskDefinition(d.Definition, def)
	values := map[string]any{}
	for k, v := range d.Values {
		values[k] = v
	}
	identity := map[string]any{"run": r.ID, "launch_kind": d.LaunchKind, "launch_source": d.LaunchKind}
	if d.Recipe != "" {
		identity["recipe"], identity["recipe_stem"], identity["source_kind"] = d.Recipe, d.Recipe, "user_registry_capability"
	} else {
		identity["source_kind"] = "inline_template"
	}
	if d.Tool != "" {
		identity["tool"] = d.Tool
	}
	if d.Singleton {
		identity["singleton"] = true
	}
	return map[string]any{
		"identity": identity,
		"launch": map[string]any{"cwd": m.stateDir(r.ID), "template": d.Script, "values": Redact(values),
			"control": nonNilStrings(d.Control), "artifacts": m.artifactManifest(m.stateDir(r.ID), d.Artifacts)},
		"definition":  Redact(def),
		"diagnostics": []string{},
	}
}

// maskDefinition masks, in the decoded Recipe def, the defaults and fixed
// values of the arguments raw declares secret.
func maskDefinition(raw json.RawMessage, def any) {
	obj, ok := def.(map[string]any)
	if !ok {
		return
	}
	var decl struct {
		Args []string `json:"args"`
	}
	if json.Unmarshal(raw, &decl) != nil {
		return
	}
	for i, a := range decl.Args {
		arg, err := ParseArg(a)
		if err != nil || !arg.Secret {
			continue
		}
		if args, ok := obj["args"].([]any); ok && i < len(args) && arg.HasDefault {
			args[i] = strings.SplitN(a, "=", 2)[0] + "=" + redactedMarker
		}
		for _, k := range []string{"defaults", "values"} {
			if m, ok := obj[k].(map[string]any); ok {
				if _, ok := m[arg.Name]; ok {
					m[arg.Name] = redactedMarker
				}
			}
		}
	}
}

// projectControl is a Control as inspection shows it: strings capped at
// 160 characters, error at 320, input redacted and bounded.
func projectControl(c store.Control) map[string]any {
	p := map[string]any{"id": cut(c.ID, previewChars), "run_instance_id": cut(c.InstanceID, previewChars),
		"action": cut(c.Action, previewChars), "status": c.Status}
	for k, t := range map[string]*time.Time{"queued_at": c.QueuedAt, "delivered_at": c.DeliveredAt, "claimed_at": c.ClaimedAt, "handled_at": c.HandledAt, "failed_at": c.FailedAt} {
		if t != nil {
			p[k] = store.FormatTime(*t)
		}
	}
	if len(c.Input) > 0 {
		p["input"] = redactJSON(c.Input, bodyPreviewChars)
	}
	if c.Error != "" {
		p["error"] = cut(RedactText(c.Error), bodyPreviewChars)
	}
	if c.SenderID != "" {
		p["sender_id"] = cut(c.SenderID, previewChars)
	}
	return p
}

type journalSummary struct {
	pending, bytes int
	oldest         time.Time
	diagnostics    []map[string]any
}

// diagnose returns the structural problem of a journal record, or "".
func diagnose(c store.Control) string {
	switch {
	case c.ID == "":
		return "invalid_control_id"
	case c.InstanceID == "":
		return "invalid_generation"
	case ValidateAction(c.Action) != nil:
		return "invalid_action"
	case !store.ControlPending(c.Status) && c.Status != store.ControlHandled && c.Status != store.ControlFailed:
		return "invalid_status"
	case c.StatusTime().IsZero():
		return "invalid_status_timestamp"
	}
	return ""
}

func summarize(cs []store.Control) journalSummary {
	var s journalSummary
	for i, c := range cs {
		b, _ := store.EncodeLine(c)
		s.bytes += len(b)
		if reason := diagnose(c); reason != "" {
			if len(s.diagnostics) < triageListMax {
				s.diagnostics = append(s.diagnostics, map[string]any{"reason": reason, "line": i + 1})
			}
			continue
		}
		if store.ControlPending(c.Status) {
			s.pending++
			if t := c.StatusTime(); !t.IsZero() && (s.oldest.IsZero() || t.Before(s.oldest)) {
				s.oldest = t
			}
		}
	}
	return s
}

func (m *Manager) controlView(ctx context.Context, r store.RunRecord, lines int) (map[string]any, error) {
	cs, err := m.st.Controls(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	d := decodeDoc(r)
	status, _ := m.status(r)
	s := summarize(cs)
	stale := 0
	for _, c := range cs {
		if store.ControlPending(c.Status) && diagnose(c) == "" && m.staleReason(r, status, c) != "within_age_threshold" {
			stale++
		}
	}
	n := lines
	if n <= 0 {
		n = recentControls
	}
	recent := []map[string]any{}
	for i := len(cs) - 1; i >= 0 && len(recent) < n; i-- {
		recent = append(recent, projectControl(cs[i]))
	}
	runtimeActions := []string{"archive", "prune"}
	if status == StatusRunning {
		runtimeActions = []string{"kill"}
	}
	v := map[string]any{"run": r.ID, "run_instance_id": r.InstanceID, "status": status,
		"pending": s.pending, "pending_limit": ControlPendingLimit, "available": max(0, ControlPendingLimit-s.pending),
		"backpressured": s.pending >= ControlPendingLimit, "journal_bytes": s.bytes, "journal_limit": store.ControlJournalMaxBytes,
		"stale_pending": stale, "diagnostics": capList(s.diagnostics), "actor_actions": nonNilStrings(d.Control), "runtime_actions": runtimeActions,
		"recent_controls": recent}
	if !s.oldest.IsZero() {
		v["oldest_pending_at"] = store.FormatTime(s.oldest)
	}
	if d.FIFO != "" && status == StatusRunning {
		v["endpoint"] = map[string]any{"path": d.FIFO, "type": "fifo"}
	}
	return v, nil
}

func (m *Manager) staleReason(r store.RunRecord, status string, c store.Control) string {
	switch {
	case r.InstanceID == "":
		return "run_generation_unavailable"
	case c.InstanceID != r.InstanceID:
		return "run_generation_replaced"
	case status != StatusRunning:
		return "run_terminal"
	case m.now().Sub(c.StatusTime()) >= staleControlAfter:
		return "age_threshold_reached"
	}
	return "within_age_threshold"
}

// traceSummary describes the retained Trace as upstream's summary does.
func traceSummary(st store.TraceStats) map[string]any {
	s := map[string]any{"history_complete": st.Marker == nil, "compacted": st.Marker != nil, "compactions_total": 0,
		"dropped_events": 0, "dropped_bytes": 0, "dropped_event_count_exact": true,
		"retained_events": st.Events, "retained_bytes": st.Bytes}
	if st.Marker != nil {
		var d map[string]any
		if json.Unmarshal(st.Marker.Data, &d) == nil {
			s["compactions_total"] = d["compactions_total"]
			s["dropped_events"] = d["dropped_valid_events_total"]
			s["dropped_bytes"] = d["dropped_bytes_total"]
			s["dropped_event_count_exact"] = d["dropped_event_count_exact"]
		}
	}
	return s
}

var sourceRank = map[string]int{"lifecycle": 6, "control": 5, "process": 4, "agent": 3, "artifact": 2, "runtime": 1}

func (m *Manager) traceView(ctx context.Context, r store.RunRecord, source string, lines int) (map[string]any, error) {
	if source == "" {
		source = "all"
	}
	if _, ok := sourceRank[source]; !ok && source != "all" {
		return nil, errorf(CodeInvalidRequest, "unsupported Trace source: %s", source)
	}
	if lines <= 0 {
		lines = defaultInspectLines
	}
	lines = min(lines, maxInspectLines)
	evs, err := m.st.Trace(ctx, r.ID, 100)
	if err != nil {
		return nil, err
	}
	st, err := m.st.TraceStats(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	type item struct {
		v    map[string]any
		ts   string
		src  string
		ord  int
		iden string
	}
	var items []item
	for i, e := range evs {
		src := "runtime"
		if strings.HasPrefix(e.Kind, "run.") || strings.HasPrefix(e.Kind, "command.") {
			src = "lifecycle"
		}
		detail := map[string]any{}
		if e.Attention != "" {
			detail["attention"] = e.Attention
		}
		if len(e.Data) > 0 {
			detail["data"] = redactJSON(e.Data, 4000)
		}
		summary := e.Summary
		if summary == "" {
			summary = e.Kind
		}
		v := map[string]any{"id": e.ID, "ts": store.FormatTime(e.TS), "source": src, "kind": e.Kind, "summary": RedactText(summary), "detail": detail}
		if e.Level != "" {
			v["level"] = e.Level
		}
		items = append(items, item{v, v["ts"].(string), src, i, e.ID})
	}
	cs, err := m.st.Controls(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	if len(cs) > 100 {
		cs = cs[len(cs)-100:]
	}
	for i, c := range cs {
		ts := store.FormatTime(c.StatusTime())
		v := map[string]any{"id": "control:" + c.ID, "ts": ts, "source": "control", "kind": "control." + c.Status,
			"summary": c.Action + " " + c.Status, "detail": projectControl(c)}
		if c.Status == store.ControlFailed {
			v["level"] = "error"
		}
		items = append(items, item{v, ts, "control", i, "control:" + c.ID})
	}
	dir := m.stateDir(r.ID)
	if r.Archived {
		dir = r.ArchiveDir
	}
	for i, stream := range []string{"stdout", "stderr"} {
		p := filepath.Join(dir, stream+".log")
		fi, err := os.Stat(p)
		if err != nil || fi.Size() == 0 {
			continue
		}
		tail, _ := tailFile(p, defaultInspectLines, 64<<10)
		ts := store.FormatTime(fi.ModTime())
		v := map[string]any{"id": "process:" + stream, "ts": ts, "source": "process", "kind": "process." + stream,
			"summary": stream, "detail": map[string]any{"tail": RedactText(tail)}}
		if stream == "stderr" {
			v["level"] = "warning"
		}
		items = append(items, item{v, ts, "process", i, "process:" + stream})
	}
	d := decodeDoc(r)
	for i, name := range sortedKeys(d.Artifacts) {
		a := d.Artifacts[name]
		p := a.Path
		if r.Archived && strings.HasPrefix(p, m.stateDir(r.ID)+"/") {
			p = filepath.Join(r.ArchiveDir, strings.TrimPrefix(p, m.stateDir(r.ID)+"/"))
		}
		rel := strings.TrimPrefix(a.Path, m.stateDir(r.ID)+"/")
		v := map[string]any{"id": "artifact:" + name, "source": "artifact", "detail": map[string]any{"name": name, "path": rel}}
		ts := store.FormatTime(r.StartedAt)
		if fi, err := os.Stat(p); err == nil && insideDir(dir, p) {
			ts = store.FormatTime(fi.ModTime())
			v["kind"], v["summary"] = "artifact.ready", name+" ready"
		} else {
			v["kind"], v["summary"] = "artifact.missing", name+" missing"
			if a.Required {
				v["level"] = "warning"
			}
		}
		v["ts"] = ts
		items = append(items, item{v, ts, "artifact", i, "artifact:" + name})
	}
	if source != "all" {
		kept := items[:0]
		for _, it := range items {
			if it.src == source {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	sort.SliceStable(items, func(i, j int) bool {
		a, b := items[i], items[j]
		if a.ts != b.ts {
			return a.ts > b.ts
		}
		if a.src == b.src {
			return a.ord > b.ord
		}
		if sourceRank[a.src] != sourceRank[b.src] {
			return sourceRank[a.src] > sourceRank[b.src]
		}
		return a.iden > b.iden
	})
	out := []map[string]any{}
	for _, it := range items {
		if len(out) == lines {
			break
		}
		out = append(out, it.v)
	}
	return map[string]any{"run": r.ID, "source": source, "summary": traceSummary(st), "items": out}, nil
}

func (m *Manager) triage(ctx context.Context, ownerID string) (map[string]any, error) {
	if ownerID == "" {
		return nil, errorf(CodeInvalidRequest, "runtime Run inventory requires a principal")
	}
	runs, err := m.st.ListRuns(ctx, ownerID)
	if err != nil {
		return nil, err
	}
	failed := []string{}
	var failedDetails []map[string]any
	var pendingStale, pendingFresh, stale, backpressured, traceDiag, attention, diags []map[string]any
	for _, r := range runs {
		status, _ := m.status(r)
		if status == StatusFailed {
			failed = append(failed, r.ID)
			v := m.view(r)
			d := map[string]any{"run": r.ID, "exit_code": v["exit_code"]}
			if h, ok := v["stderr_head"]; ok {
				d["stderr_head"] = h
			}
			failedDetails = append(failedDetails, d)
		}
		cs, err := m.st.Controls(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		s := summarize(cs)
		for _, d := range s.diagnostics {
			d["run"] = r.ID
			diags = append(diags, d)
		}
		for _, c := range cs {
			if !store.ControlPending(c.Status) || diagnose(c) != "" {
				continue
			}
			reason := m.staleReason(r, status, c)
			e := map[string]any{"run": r.ID, "id": c.ID, "action": c.Action, "status": c.Status, "reason": reason,
				"age_ms": m.now().Sub(c.StatusTime()).Milliseconds()}
			if reason == "within_age_threshold" {
				pendingFresh = append(pendingFresh, e)
			} else {
				e["stale"] = true
				pendingStale = append(pendingStale, e)
				stale = append(stale, e)
			}
		}
		if s.pending >= ControlPendingLimit {
			backpressured = append(backpressured, map[string]any{"run": r.ID, "pending": s.pending, "pending_limit": ControlPendingLimit, "journal_bytes": s.bytes})
		}
		st, err := m.st.TraceStats(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		if st.Marker != nil {
			d := traceSummary(st)
			d["run"] = r.ID
			traceDiag = append(traceDiag, d)
		}
		evs, err := m.st.Trace(ctx, r.ID, 200)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			if e.Attention == "notify" || e.Attention == "followup" || e.Attention == "steer" {
				attention = append(attention, map[string]any{"run": r.ID, "id": e.ID, "kind": e.Kind, "attention": e.Attention,
					"summary": RedactText(e.Summary), "ts": store.FormatTime(e.TS)})
			}
		}
	}
	sort.SliceStable(attention, func(i, j int) bool { return attention[i]["ts"].(string) > attention[j]["ts"].(string) })
	pending := append(pendingStale, pendingFresh...)
	next := []string{}
	if len(failed) > 0 {
		next = append(next, "inspect target=runtime view=runs status=failed")
	}
	seen := map[string]bool{}
	for _, e := range append(append([]map[string]any{}, stale...), backpressured...) {
		id := e["run"].(string)
		if !seen[id] && len(seen) < 3 {
			seen[id] = true
			next = append(next, "inspect target=run:"+id+" view=control")
		}
	}
	for i, e := range attention {
		if i == 3 {
			break
		}
		next = append(next, "inspect target=run:"+e["run"].(string)+" view=trace source=runtime")
	}
	return map[string]any{
		"failed_runs":              failed,
		"failed_run_count":         len(failed),
		"failed_run_details":       capList(failedDetails),
		"pending_control_count":    len(pending),
		"pending_controls":         capList(pending),
		"stale_control_count":      len(stale),
		"stale_controls":           capList(stale),
		"backpressured_run_count":  len(backpressured),
		"backpressured_runs":       capList(backpressured),
		"control_diagnostic_count": len(diags),
		"control_diagnostics":      capList(diags),
		"trace_diagnostic_count":   len(traceDiag),
		"trace_diagnostics":        capList(traceDiag),
		"attention_events":         capList(attention),
		"next_actions":             next,
	}, nil
}

func capList(l []map[string]any) []map[string]any {
	if l == nil {
		return []map[string]any{}
	}
	if len(l) > triageListMax {
		return l[:triageListMax]
	}
	return l
}

// recipesSummary lists the Recipe files under <data>/recipes.
func (m *Manager) recipesSummary() map[string]any {
	active := []map[string]any{}
	invalid := []map[string]any{}
	disabled := []map[string]any{}
	entries, _ := os.ReadDir(m.recipesDir())
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		stem := strings.TrimSuffix(e.Name(), ".json")
		p := filepath.Join(m.recipesDir(), e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			invalid = append(invalid, map[string]any{"id": stem, "path": p, "reason": err.Error()})
			continue
		}
		var probe struct {
			Disabled bool `json:"disabled"`
		}
		_ = json.Unmarshal(b, &probe)
		r, err := DecodeRecipe(b)
		if probe.Disabled {
			disabled = append(disabled, map[string]any{"id": stem, "path": p})
			continue
		}
		if err != nil {
			invalid = append(invalid, map[string]any{"id": stem, "path": p, "invalid": true, "reason": err.Error()})
			continue
		}
		active = append(active, map[string]any{"id": stem, "path": p, "description": r.Description, "args": nonNilStrings(r.Args),
			"control": nonNilStrings(r.Control), "async": r.Async, "singleton": r.Singleton, "disabled": false, "invalid": false,
			"source_kind": "user_registry_capability"})
	}
	next := []string{}
	if len(active) > 0 {
		next = append(next, "actors_run_spawn recipe="+active[0]["id"].(string))
	}
	return map[string]any{"active": active, "invalid": invalid, "disabled": disabled, "shadowed": []any{}, "diagnostics": []any{},
		"root": m.recipesDir(), "counts": map[string]any{"active": len(active), "invalid": len(invalid), "disabled": len(disabled)},
		"next_actions": next}
}

// compactText is the one-line answer of a view, as upstream's compact
// text.
func compactText(target, view string, v map[string]any) string {
	if strings.HasPrefix(target, "run:") {
		return "run=" + strings.TrimPrefix(target, "run:") + " view=" + view
	}
	switch {
	case target == "runtime" && view == "runs":
		runs, _ := v["runs"].([]map[string]any)
		return "runtime runs=" + strconv.Itoa(len(runs))
	case target == "runtime" && view == "status":
		return "runtime version=" + asString(v["version"]) + " state_schema=" + StateSchema + " automatic_review=false"
	case target == "runtime" && view == "triage":
		return "runtime failed=" + strconv.Itoa(len(v["failed_runs"].([]string))) + " pending_controls=" + strconv.Itoa(v["pending_control_count"].(int)) +
			" stale_controls=" + strconv.Itoa(v["stale_control_count"].(int)) + " backpressured=" + strconv.Itoa(v["backpressured_run_count"].(int)) +
			" incomplete_trace=" + strconv.Itoa(v["trace_diagnostic_count"].(int)) + " attention=" + strconv.Itoa(len(v["attention_events"].([]map[string]any)))
	case target == "recipes":
		c := v["counts"].(map[string]any)
		return "recipes active=" + strconv.Itoa(c["active"].(int)) + " invalid=" + strconv.Itoa(c["invalid"].(int)) + " disabled=" + strconv.Itoa(c["disabled"].(int))
	}
	return target + " view=" + view
}

func asString(v any) string {
	s, _ := v.(string)
	return s
}
