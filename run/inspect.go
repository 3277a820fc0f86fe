package run

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/assent-run/assent/run/journal"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
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
	// LocalOnly leaves out of a Trace view what only another node could
	// give: the log tails of a Run that node supervises. A caller that
	// asks for the logs itself sets it, so it does not wait twice.
	LocalOnly bool `json:"-"`
}

// Inspect answers one view: runtime status|runs|triage, run:<id>
// status|recipe|trace|control, recipes summary|status, tool:<name>
// status|schema (tool views are answered by Tools' registry, see
// ToolSet). Run views are owner-only. See View for the views' types.
func (m *Manager) Inspect(ctx context.Context, ownerID string, req InspectRequest) (View, error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	target := strings.TrimSpace(req.Target)
	view := strings.TrimSpace(req.View)
	switch {
	case target == "runtime":
		switch view {
		case "status":
			return &RuntimeStatus{RunRoot: m.runsDir(), StateSchema: StateSchema, Version: m.cfg.Version}, nil
		case "runs":
			runs, err := m.List(ctx, ownerID, req.Status)
			if err != nil {
				return nil, err
			}
			return &RunList{OwnerSession: ownerID, Runs: runs}, nil
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
			return m.traceView(ctx, r, req.Source, req.Lines, req.LocalOnly)
		case "control":
			return m.controlView(ctx, r, req.Lines)
		}
		return nil, errorf(CodeInvalidRequest, "inspect run:<id> supports view=status, view=recipe, view=trace, or view=control.")
	}
	return nil, errorf(CodeInvalidRequest, "unsupported inspect target: %s; use run:<id>, runtime, recipes, or tool:<name>", target)
}

func (m *Manager) recipeView(r store.RunRecord) *RecipeView {
	d := decodeDoc(r)
	var def any
	_ = json.Unmarshal(d.Definition, &def)
	maskDefinition(d.Definition, def)
	values := make(map[string]string, len(d.Values))
	for k, v := range d.Values {
		if SecretKey(k) {
			v = redactedMarker
		}
		values[k] = RedactText(v)
	}
	id := RecipeIdentity{Run: r.ID, LaunchKind: d.LaunchKind, LaunchSource: d.LaunchKind, SourceKind: "inline_template",
		Tool: d.Tool, Singleton: d.Singleton}
	if d.Recipe != "" {
		id.Recipe, id.RecipeStem, id.SourceKind = d.Recipe, d.Recipe, "user_registry_capability"
	}
	return &RecipeView{
		Identity: id,
		Launch: LaunchView{Cwd: m.stateDir(r.ID), Template: d.Script, Values: values,
			Control: nonNilStrings(d.Control), Artifacts: m.artifactManifest(m.stateDir(r.ID), d.Artifacts)},
		Definition:  Redact(def),
		Diagnostics: []string{},
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
func projectControl(c store.Control) ControlRecord {
	p := ControlRecord{ID: cut(c.ID, previewChars), InstanceID: cut(c.InstanceID, previewChars),
		Action: cut(c.Action, previewChars), Status: c.Status, SenderID: cut(c.SenderID, previewChars)}
	for _, t := range []struct {
		dst *string
		at  *time.Time
	}{{&p.QueuedAt, c.QueuedAt}, {&p.DeliveredAt, c.DeliveredAt}, {&p.ClaimedAt, c.ClaimedAt}, {&p.HandledAt, c.HandledAt}, {&p.FailedAt, c.FailedAt}} {
		if t.at != nil {
			*t.dst = store.FormatTime(*t.at)
		}
	}
	if len(c.Input) > 0 {
		p.Input = redactJSON(c.Input, bodyPreviewChars)
	}
	if c.Error != "" {
		p.Error = cut(RedactText(c.Error), bodyPreviewChars)
	}
	return p
}

type journalSummary struct {
	pending, bytes int
	oldest         time.Time
	diagnostics    []ControlDiagnostic
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
				s.diagnostics = append(s.diagnostics, ControlDiagnostic{Reason: reason, Line: i + 1})
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

func (m *Manager) controlView(ctx context.Context, r store.RunRecord, lines int) (*ControlView, error) {
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
	recent := []ControlRecord{}
	for i := len(cs) - 1; i >= 0 && len(recent) < n; i-- {
		recent = append(recent, projectControl(cs[i]))
	}
	runtimeActions := []string{"archive", "prune"}
	if status == StatusRunning {
		runtimeActions = []string{"kill"}
	}
	v := &ControlView{Run: r.ID, InstanceID: r.InstanceID, Status: status,
		Pending: s.pending, PendingLimit: ControlPendingLimit, Available: max(0, ControlPendingLimit-s.pending),
		Backpressured: s.pending >= ControlPendingLimit, JournalBytes: s.bytes, JournalLimit: store.ControlJournalMaxBytes,
		StalePending: stale, Diagnostics: capList(s.diagnostics), ActorActions: nonNilStrings(d.Control), RuntimeActions: runtimeActions,
		RecentControls: recent}
	if !s.oldest.IsZero() {
		v.OldestPendingAt = store.FormatTime(s.oldest)
	}
	if d.FIFO != "" && status == StatusRunning {
		v.Endpoint = &Endpoint{Path: d.FIFO, Type: "fifo"}
	}
	return v, nil
}

func (m *Manager) staleReason(r store.RunRecord, status Status, c store.Control) string {
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
func traceSummary(st store.TraceStats) TraceSummary {
	s := TraceSummary{HistoryComplete: st.Marker == nil, Compacted: st.Marker != nil, DroppedEventCountExact: true,
		RetainedEvents: st.Events, RetainedBytes: st.Bytes}
	if st.Marker != nil {
		var d journal.Compaction
		if json.Unmarshal(st.Marker.Data, &d) == nil {
			s.CompactionsTotal = d.CompactionsTotal
			s.DroppedEvents = d.DroppedValidEventsTotal
			s.DroppedBytes = d.DroppedBytesTotal
			s.DroppedEventCountExact = d.DroppedEventCountExact
		}
	}
	return s
}

var sourceRank = map[string]int{"lifecycle": 6, "control": 5, "process": 4, "agent": 3, "artifact": 2, "runtime": 1}

func (m *Manager) traceView(ctx context.Context, r store.RunRecord, source string, lines int, localOnly bool) (*TraceView, error) {
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
		v   TraceItem
		ord int
	}
	var items []item
	for i, e := range evs {
		src := "runtime"
		if strings.HasPrefix(e.Kind, "run.") || strings.HasPrefix(e.Kind, "command.") {
			src = "lifecycle"
		}
		summary := e.Summary
		if summary == "" {
			summary = e.Kind
		}
		v := TraceItem{ID: e.ID, TS: store.FormatTime(e.TS), Source: src, Kind: e.Kind, Summary: RedactText(summary), Level: e.Level,
			Detail: TraceDetail{Attention: e.Attention}}
		if len(e.Data) > 0 {
			v.Detail.Data = redactJSON(e.Data, 4000)
		}
		items = append(items, item{v, i})
	}
	cs, err := m.st.Controls(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	if len(cs) > 100 {
		cs = cs[len(cs)-100:]
	}
	for i, c := range cs {
		p := projectControl(c)
		v := TraceItem{ID: "control:" + c.ID, TS: store.FormatTime(c.StatusTime()), Source: "control", Kind: "control." + c.Status,
			Summary: c.Action + " " + c.Status, Detail: TraceDetail{ControlRecord: &p}}
		if c.Status == store.ControlFailed {
			v.Level = "error"
		}
		items = append(items, item{v, i})
	}
	dir := m.stateDir(r.ID)
	if r.Archived {
		dir = r.ArchiveDir
	}
	tails := m.processTails(ctx, r, dir, source, localOnly)
	for i, stream := range []string{"stdout", "stderr"} {
		if t, ok := tails[stream]; ok && t.text != "" {
			v := TraceItem{ID: "process:" + stream, TS: store.FormatTime(t.at), Source: "process", Kind: "process." + stream,
				Summary: stream, Detail: TraceDetail{Tail: RedactText(t.text)}}
			if stream == "stderr" {
				v.Level = "warning"
			}
			items = append(items, item{v, i})
		}
	}
	d := decodeDoc(r)
	for i, name := range slices.Sorted(maps.Keys(d.Artifacts)) {
		a := d.Artifacts[name]
		p := a.Path
		if r.Archived && strings.HasPrefix(p, m.stateDir(r.ID)+"/") {
			p = filepath.Join(r.ArchiveDir, strings.TrimPrefix(p, m.stateDir(r.ID)+"/"))
		}
		rel := strings.TrimPrefix(a.Path, m.stateDir(r.ID)+"/")
		v := TraceItem{ID: "artifact:" + name, TS: store.FormatTime(r.StartedAt), Source: "artifact", Detail: TraceDetail{Name: name, Path: rel}}
		if fi, ok := statRunFile(dir, p); ok {
			v.TS = store.FormatTime(fi.ModTime())
			v.Kind, v.Summary = "artifact.ready", name+" ready"
		} else {
			v.Kind, v.Summary = "artifact.missing", name+" missing"
			if a.Required {
				v.Level = "warning"
			}
		}
		items = append(items, item{v, i})
	}
	if source != "all" {
		items = slices.DeleteFunc(items, func(it item) bool { return it.v.Source != source })
	}
	slices.SortStableFunc(items, func(a, b item) int {
		if c := cmp.Compare(b.v.TS, a.v.TS); c != 0 {
			return c
		}
		if a.v.Source == b.v.Source {
			return cmp.Compare(b.ord, a.ord)
		}
		if c := cmp.Compare(sourceRank[b.v.Source], sourceRank[a.v.Source]); c != 0 {
			return c
		}
		return cmp.Compare(b.v.ID, a.v.ID)
	})
	out := make([]TraceItem, 0, min(lines, len(items)))
	for _, it := range items[:min(lines, len(items))] {
		out = append(out, it.v)
	}
	return &TraceView{Run: r.ID, Source: source, Summary: traceSummary(st), Items: out}, nil
}

// processTailBytes bounds the tail of a log a Trace item shows.
const processTailBytes = 64 << 10

// processTails returns, by stream, the tails of Run r's stdout and stderr
// the Trace view of source shows: the last defaultInspectLines lines, at
// most processTailBytes, and when they were written (a log on this node,
// dir being its directory) or read (a log on the node that supervises the
// Run, which is asked for it). A stream with no tail is missing, as are
// both when source leaves out process items or the Run's node cannot
// answer, or is not to be asked (localOnly).
func (m *Manager) processTails(ctx context.Context, r store.RunRecord, dir, source string, localOnly bool) map[string]processTail {
	if source != "all" && source != "process" {
		return nil
	}
	if node := m.supervisor(r); node != "" && !r.Archived {
		if localOnly || r.Stop == string(StatusLost) {
			// Its node stopped answering: do not wait for it.
			return nil
		}
		tails := m.remoteTails(ctx, r, node, defaultInspectLines)
		for stream, t := range tails {
			t.text = lastBytes(t.text, processTailBytes)
			tails[stream] = t
		}
		return tails
	}
	tails := make(map[string]processTail, 2)
	for _, stream := range []string{"stdout", "stderr"} {
		f, fi, err := openRunFile(dir, filepath.Join(dir, stream+".log"))
		if err != nil {
			continue
		}
		if fi.Size() > 0 {
			text, _ := tailOf(f, fi.Size(), defaultInspectLines, processTailBytes)
			tails[stream] = processTail{text: text, at: fi.ModTime()}
		}
		f.Close()
	}
	return tails
}

// lastBytes returns the end of s, at most limit bytes, starting on a UTF-8
// boundary.
func lastBytes(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	s = s[len(s)-limit:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}

func (m *Manager) triage(ctx context.Context, ownerID string) (*Triage, error) {
	if ownerID == "" {
		return nil, errorf(CodeInvalidRequest, "runtime Run inventory requires a principal")
	}
	runs, err := m.st.ListRuns(ctx, ownerID)
	if err != nil {
		return nil, err
	}
	failed := []string{}
	var failedDetails []FailedRun
	var pendingStale, pendingFresh []PendingControl
	var backpressured []BackpressuredRun
	var traceDiag []TraceDiagnostic
	var attention []AttentionEvent
	var diags []ControlDiagnostic
	for _, r := range runs {
		status, _ := m.status(r)
		if status == StatusFailed {
			failed = append(failed, r.ID)
			v := m.view(r)
			failedDetails = append(failedDetails, FailedRun{Run: r.ID, ExitCode: v.ExitCode, StderrHead: v.StderrHead})
		}
		cs, err := m.st.Controls(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		s := summarize(cs)
		for _, d := range s.diagnostics {
			d.Run = r.ID
			diags = append(diags, d)
		}
		for _, c := range cs {
			if !store.ControlPending(c.Status) || diagnose(c) != "" {
				continue
			}
			reason := m.staleReason(r, status, c)
			e := PendingControl{Run: r.ID, ID: c.ID, Action: c.Action, Status: c.Status, Reason: reason,
				AgeMS: m.now().Sub(c.StatusTime()).Milliseconds()}
			if reason == "within_age_threshold" {
				pendingFresh = append(pendingFresh, e)
			} else {
				e.Stale = true
				pendingStale = append(pendingStale, e)
			}
		}
		if s.pending >= ControlPendingLimit {
			backpressured = append(backpressured, BackpressuredRun{Run: r.ID, Pending: s.pending, PendingLimit: ControlPendingLimit, JournalBytes: s.bytes})
		}
		st, err := m.st.TraceStats(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		if st.Marker != nil {
			traceDiag = append(traceDiag, TraceDiagnostic{Run: r.ID, TraceSummary: traceSummary(st)})
		}
		evs, err := m.st.Trace(ctx, r.ID, 200)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			if e.Attention == "notify" || e.Attention == "followup" || e.Attention == "steer" {
				attention = append(attention, AttentionEvent{Run: r.ID, ID: e.ID, Kind: e.Kind, Attention: e.Attention,
					Summary: RedactText(e.Summary), TS: store.FormatTime(e.TS)})
			}
		}
	}
	slices.SortStableFunc(attention, func(a, b AttentionEvent) int { return cmp.Compare(b.TS, a.TS) })
	pending := append(pendingStale, pendingFresh...)
	next := []tool.Next{}
	if len(failed) > 0 {
		next = append(next, inspectNext("runtime", "runs", "status", "failed"))
	}
	seen := map[string]bool{}
	troubled := make([]string, 0, len(pendingStale)+len(backpressured))
	for _, e := range pendingStale {
		troubled = append(troubled, e.Run)
	}
	for _, e := range backpressured {
		troubled = append(troubled, e.Run)
	}
	for _, id := range troubled {
		if !seen[id] && len(seen) < 3 {
			seen[id] = true
			next = append(next, inspectNext("run:"+id, "control"))
		}
	}
	for _, e := range attention[:min(3, len(attention))] {
		next = append(next, inspectNext("run:"+e.Run, "trace", "source", "runtime"))
	}
	return &Triage{
		FailedRuns:             failed,
		FailedRunCount:         len(failed),
		FailedRunDetails:       capList(failedDetails),
		PendingControlCount:    len(pending),
		PendingControls:        capList(pending),
		StaleControlCount:      len(pendingStale),
		StaleControls:          capList(pendingStale),
		BackpressuredRunCount:  len(backpressured),
		BackpressuredRuns:      capList(backpressured),
		ControlDiagnosticCount: len(diags),
		ControlDiagnostics:     capList(diags),
		TraceDiagnosticCount:   len(traceDiag),
		TraceDiagnostics:       capList(traceDiag),
		AttentionEvents:        capList(attention),
		NextActions:            next,
	}, nil
}

// capList returns l with at most triageListMax entries, never nil.
func capList[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l[:min(len(l), triageListMax)]
}

// recipesSummary lists the Recipe files under <data>/recipes.
func (m *Manager) recipesSummary() *RecipesSummary {
	v := &RecipesSummary{Active: []RecipeInfo{}, Invalid: []RecipeIssue{}, Disabled: []RecipeIssue{}, Shadowed: []string{},
		Diagnostics: []string{}, Root: m.recipesDir(), NextActions: []tool.Next{}}
	entries, _ := os.ReadDir(m.recipesDir())
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		stem := strings.TrimSuffix(e.Name(), ".json")
		p := filepath.Join(m.recipesDir(), e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			v.Invalid = append(v.Invalid, RecipeIssue{ID: stem, Path: p, Reason: err.Error()})
			continue
		}
		var probe struct {
			Disabled bool `json:"disabled"`
		}
		_ = json.Unmarshal(b, &probe)
		r, err := DecodeRecipe(b)
		if probe.Disabled {
			v.Disabled = append(v.Disabled, RecipeIssue{ID: stem, Path: p})
			continue
		}
		if err != nil {
			v.Invalid = append(v.Invalid, RecipeIssue{ID: stem, Path: p, Invalid: true, Reason: err.Error()})
			continue
		}
		v.Active = append(v.Active, RecipeInfo{ID: stem, Path: p, Description: r.Description, Args: nonNilStrings(r.Args),
			Control: nonNilStrings(r.Control), Async: r.Async, Singleton: r.Singleton, SourceKind: "user_registry_capability"})
	}
	if len(v.Active) > 0 {
		v.NextActions = append(v.NextActions, tool.NextCall(ToolSpawn, map[string]any{"recipe": v.Active[0].ID}))
	}
	v.Counts = RecipeCounts{Active: len(v.Active), Invalid: len(v.Invalid), Disabled: len(v.Disabled)}
	return v
}
