package run

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/assent-run/assent/tool"
)

// compileSchema compiles an output schema, failing the test when it is
// not a valid JSON Schema.
func compileSchema(t *testing.T, name string, raw json.RawMessage) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s: schema is not JSON: %v", name, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(name+".json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(name + ".json")
	if err != nil {
		t.Fatalf("%s: schema does not compile: %v", name, err)
	}
	return s
}

// validate reports whether the JSON encoding of v conforms to s.
func validate(s *jsonschema.Schema, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return s.Validate(doc)
}

// The output schemas of the actors_* tools accept a filled value of every
// type the tool answers with, and refuse what none of them is.
func TestOutputSchemasMatchResults(t *testing.T) {
	code, size := 3, int64(12)
	run := &Run{ID: "r1", InstanceID: "i1", Generation: 2, Status: StatusFailed, OwnerID: "alice", PID: 42,
		ProcessIdentity: "exited", StateSchema: StateSchema, StateDir: "/d/runs/r1", StdoutLog: "/d/runs/r1/stdout.log",
		StderrLog: "/d/runs/r1/stderr.log", CreatedAt: "2026-01-01T00:00:00.000Z", StartedAt: "2026-01-01T00:00:00.000Z",
		EndedAt: "2026-01-01T00:00:01.000Z", LaunchKind: "spawn", Recipe: "report", Control: []string{"pause"}, ExitCode: &code,
		Artifacts:  map[string]ArtifactState{"report": {Path: "/d/runs/r1/r.md", Exists: true, Kind: "report", MediaType: "text/markdown", Required: true, Size: &size}},
		StderrHead: "boom", Archived: true, ArchiveDir: "/d/archive/r1", Reused: true}
	pending := &PendingApproval{Status: StatusPendingApproval, Proposal: "p1", Kind: "spawn", Run: "r1", URL: "http://x/p1",
		Message: "waits", Script: "echo", WorkDir: "/d/runs/r1", NextActions: []tool.Next{inspectNext("proposal:p1", "status")}}
	record := ControlRecord{ID: "c1", InstanceID: "i1", Action: "pause", Status: "failed", QueuedAt: "t", DeliveredAt: "t",
		ClaimedAt: "t", FailedAt: "t", Input: map[string]any{"why": "x"}, Error: "busy", SenderID: "ada"}
	decided := "ada"
	s := outputSchemas()
	tests := []struct {
		tool   string
		schema json.RawMessage
		ok     []any
		bad    []any
	}{
		{ToolSpawn, s.spawn, []any{SpawnResult{Run: run, URL: "http://x/runs/r1", NextActions: []tool.Next{inspectNext("run:r1", "trace")}}, pending},
			[]any{map[string]any{"status": "running"}, map[string]any{"run": "r1"}}},
		{"recipe tool", s.recipeRun, []any{SpawnResult{Run: run, URL: "u"}}, []any{pending}},
		{ToolInspect, s.inspect, []any{
			&RuntimeStatus{AutomaticReview: true, RunRoot: "/d/runs", StateSchema: StateSchema, Version: "v"},
			&RunList{OwnerSession: "alice", Runs: []Run{*run}},
			&Triage{FailedRuns: []string{"r1"}, FailedRunCount: 1, FailedRunDetails: []FailedRun{{Run: "r1", ExitCode: &code, StderrHead: "x"}},
				PendingControls:    []PendingControl{{Run: "r1", ID: "c1", Action: "pause", Status: "queued", Reason: "r", AgeMS: 5, Stale: true}},
				BackpressuredRuns:  []BackpressuredRun{{Run: "r1", Pending: 64, PendingLimit: 64, JournalBytes: 10}},
				ControlDiagnostics: []ControlDiagnostic{{Run: "r1", Reason: "bad", Line: 3}}, TraceDiagnostics: []TraceDiagnostic{{Run: "r1"}},
				AttentionEvents: []AttentionEvent{{Run: "r1", ID: "e1", Kind: "k", Attention: "notify", Summary: "s", TS: "t"}}, NextActions: []tool.Next{inspectNext("runtime", "triage")}},
			&RecipesSummary{Active: []RecipeInfo{{ID: "report", Path: "/d/recipes/report.json"}}, Invalid: []RecipeIssue{{ID: "x", Path: "p", Invalid: true, Reason: "r"}},
				Disabled: []RecipeIssue{}, Shadowed: []string{}, Diagnostics: []string{}, Root: "/d/recipes", Counts: RecipeCounts{Active: 1}, NextActions: []tool.Next{}},
			run,
			&RecipeView{Identity: RecipeIdentity{Run: "r1", LaunchKind: "spawn", LaunchSource: "spawn", Recipe: "report", RecipeStem: "report", SourceKind: "user_registry_capability", Tool: "t", Singleton: true},
				Launch:     LaunchView{Cwd: "/d", Template: "echo", Values: map[string]string{"a": "b"}, Control: []string{}, Artifacts: map[string]ArtifactState{}},
				Definition: map[string]any{"template": "echo"}, Diagnostics: []string{}},
			&TraceView{Run: "r1", Source: "all", Summary: TraceSummary{HistoryComplete: true, RetainedEvents: 1}, Items: []TraceItem{
				{ID: "e1", TS: "t", Source: "lifecycle", Kind: "run.start", Summary: "s", Level: "info", Detail: TraceDetail{Attention: "notify", Data: map[string]any{"a": 1}}},
				{ID: "c1", TS: "t", Source: "control", Kind: "control.pause", Summary: "s", Detail: TraceDetail{ControlRecord: &record}},
				{ID: "l", TS: "t", Source: "process", Kind: "stdout", Summary: "s", Detail: TraceDetail{Tail: "x", Name: "n", Path: "p"}}}},
			&ControlView{Run: "r1", InstanceID: "i1", Status: StatusRunning, Pending: 1, PendingLimit: 64, Available: 63, OldestPendingAt: "t",
				Diagnostics: []ControlDiagnostic{}, ActorActions: []string{"pause"}, RuntimeActions: []string{"kill"},
				RecentControls: []ControlRecord{record}, Endpoint: &Endpoint{Path: "/d/f.fifo", Type: "fifo"}},
			&Proposal{ID: "p1", Kind: "spawn", Status: "approved", Target: "r1", Proposer: "mallory", Recipe: map[string]any{"template": "echo"},
				Script: "echo", WorkDir: "/d", EnvNames: []string{}, Controls: []string{}, Values: map[string]json.RawMessage{"a": json.RawMessage(`1`)},
				CreatedAt: "t", URL: "u", DecidedBy: &decided, DecidedAt: "t", Reason: "ok", Result: map[string]any{"run": "r1"}, NextActions: []tool.Next{}},
			toolViewResult{"name": "controls_list", "description": "d", "parameters": map[string]any{}, "source": "builtin", "callable_now": true, "persisted": false},
		}, []any{map[string]any{"bogus": true}}},
		{ToolControl, s.control, []any{
			ControlApplied{Control: ControlTarget{Target: "run:r1", Action: "pause"}, Result: ControlResult{Delivery: &ControlDelivery{Action: "pause", Bytes: 90,
				ControlID: "c1", Delivery: "queued", EndpointType: "fifo", NextActions: []tool.Next{}, Run: "r1", InstanceID: "i1"}}},
			ControlApplied{Control: ControlTarget{Target: "run:r1", Action: "kill"}, Result: ControlResult{Kill: &KillResult{Killed: true, Stopped: true,
				Status: StatusRunning, ProcessIdentity: "valid", PID: 4, Signal: "SIGKILL", SignalTarget: "processGroup", StateDir: "/d"}}},
			ControlApplied{Control: ControlTarget{Target: "run:r1", Action: "archive"}, Result: ControlResult{Archive: &ArchiveResult{Archived: true,
				ArchiveDir: "/a", OriginalStateDir: "/d", Run: "r1", Status: StatusDone, TS: "t"}}},
			ControlApplied{Control: ControlTarget{Target: "run:r1", Action: "prune"}, Result: ControlResult{Prune: &PruneResult{Pruned: true,
				PreservedArtifacts: map[string]string{"r": "/p"}, Run: "r1", StateDir: "/d", TS: "t"}}},
		}, []any{ControlApplied{}, map[string]any{"control": map[string]any{"target": "run:r1", "action": "x"}, "result": map[string]any{"bogus": 1}}}},
		{ToolRegister, s.register, []any{
			&ToolRegistration{Activation: "current_session", ActivationBoundary: "current_session", Args: []string{"file:path"}, NextActions: []tool.Next{tool.NextCall("a_b", nil)},
				OptionalArgs: []string{}, RequiredArgs: []string{"file"}, Source: "template", Tool: "a_b", Persisted: true},
			&ToolList{Tools: []string{"a_b"}}, &ToolDeletion{Tool: "a_b", Deleted: true}, pending,
		}, []any{map[string]any{"tools": "a_b"}}},
	}
	for _, tc := range tests {
		t.Run(tc.tool, func(t *testing.T) {
			sch := compileSchema(t, tc.tool, tc.schema)
			var root struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(tc.schema, &root); root.Type != "object" {
				t.Errorf("root type %q, want object", root.Type)
			}
			for _, v := range tc.ok {
				if err := validate(sch, v); err != nil {
					t.Errorf("%T does not conform: %v", v, err)
				}
			}
			for _, v := range tc.bad {
				if validate(sch, v) == nil {
					t.Errorf("%#v conforms; want it refused", v)
				}
			}
		})
	}
}

// The actors_* tools declare the generated schemas.
func TestToolsDeclareGeneratedSchemas(t *testing.T) {
	f := newFixture(t)
	ts, _ := newToolSet(t, f)
	s := outputSchemas()
	want := map[string]json.RawMessage{ToolSpawn: s.spawn, ToolInspect: s.inspect, ToolControl: s.control, ToolRegister: s.register}
	for _, tl := range ts.Tools() {
		if w, ok := want[tl.Name]; ok && !bytes.Equal(tl.OutputSchema, w) {
			t.Errorf("%s declares %s", tl.Name, tl.OutputSchema)
		}
	}
}
