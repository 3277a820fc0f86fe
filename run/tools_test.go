package run

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
)

// call calls a tool as owner, an agent trusted with GrantCommandExecute.
func call(t *testing.T, reg *tool.Registry, name, owner, args string) (*tool.Result, error) {
	t.Helper()
	return callAs(t, reg, name, store.Principal{ID: owner, Kind: store.KindAgent, Grants: []string{GrantCommandExecute}}, args)
}

func callAs(t *testing.T, reg *tool.Registry, name string, p store.Principal, args string) (*tool.Result, error) {
	t.Helper()
	return reg.Call(context.Background(), name, tool.Call{Principal: p, Args: json.RawMessage(args)})
}

func toolCode(err error) string {
	var te *tool.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return ""
}

func TestToolSurface(t *testing.T) {
	f := newFixture(t)
	reg := tool.NewRegistry()
	if err := reg.Register(tool.Tool{Name: "controls_list", Handler: func(context.Context, tool.Call) (*tool.Result, error) { return nil, nil }}); err != nil {
		t.Fatal(err)
	}
	ts := mustToolSet(t, f.db, f.m, reg)
	if err := ts.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, tl := range reg.List() {
		if !tl.Hidden {
			listed[tl.Name] = true
		}
	}
	for _, n := range []string{ToolSpawn, ToolInspect, ToolControl, ToolRegister} {
		if !listed[n] {
			t.Errorf("%s not listed", n)
		}
	}
	for alias := range legacyAliases {
		if listed[alias] {
			t.Errorf("legacy %s listed", alias)
		}
		if _, ok := reg.Lookup(alias); !ok {
			t.Errorf("legacy %s not callable", alias)
		}
	}
	// The same dispatch under both names.
	for _, name := range []string{ToolInspect, "inspect"} {
		res, err := call(t, reg, name, "alice", `{"target":"runtime","view":"status"}`)
		if err != nil || !strings.HasPrefix(res.Text, "runtime version=") {
			t.Fatalf("%s: %v %v", name, res, err)
		}
	}
	if _, err := call(t, reg, ToolSpawn, "alice", `{"template":"true","state_dir":"/tmp"}`); err == nil || !strings.Contains(err.Error(), "state_dir is not supported") {
		t.Fatalf("state_dir: %v", err)
	}
	if _, err := call(t, reg, "message", "alice", `{"target":"run:x","action":"pause","to":"y"}`); err == nil || !strings.Contains(err.Error(), "actor-message fields are removed") {
		t.Fatalf("removed fields: %v", err)
	}

	// Registration rules.
	tests := []struct {
		args string
		code string
	}{
		{`{"name":"transcribe","template":"echo","description":"d"}`, CodeInvalidRequest},
		{`{"name":"spawn","template":"echo","description":"d"}`, CodeInvalidRequest},
		{`{"name":"actors_run_spawn","template":"echo","description":"d"}`, CodeReservedName},
		{`{"name":"controls_list","template":"echo","description":"d"}`, CodeToolCollision},
		{`{"name":"audio_transcribe","template":"echo"}`, CodeInvalidRequest},
		{`{"name":"audio_transcribe","template":"echo {x}","description":"d","defaults":{"state_dir":"/"}}`, CodeInvalidRequest},
		{`{"name":"audio_transcribe","from":"x","template":"y"}`, CodeInvalidRequest},
		{`{"name":"audio_transcribe","template":"echo","description":"d","values":{}}`, tool.CodeInvalidParams},
	}
	for _, tc := range tests {
		if _, err := call(t, reg, ToolRegister, "alice", tc.args); toolCode(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.args, err, tc.code)
		}
	}
	res, err := call(t, reg, ToolRegister, "alice", `{"name":"text_greet","template":"echo hello {who}","args":"who=world","description":"Greets"}`)
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	if v := structured(t, res); v["callable_now"] != true {
		t.Fatalf("register: %v", v)
	}
	if _, err := call(t, reg, ToolRegister, "alice", `{"name":"text_greet","template":"echo hi","description":"Greets"}`); toolCode(err) != CodeToolExists {
		t.Fatalf("re-register without update: %v", err)
	}
	if _, err := call(t, reg, ToolRegister, "bob", `{"name":"text_greet","template":"echo hi","description":"x","update":true}`); toolCode(err) != CodeToolCollision {
		t.Fatalf("another owner's update: %v", err)
	}
	res, err = call(t, reg, "text_greet", "alice", `{"who":"O'Brien"}`)
	if err != nil || res.Text != "hello O'Brien\n" {
		t.Fatalf("call: %v %v", res, err)
	}
	// expose:false keeps it registered but not callable.
	if _, err := call(t, reg, ToolRegister, "alice", `{"name":"text_greet","update":true,"expose":false}`); err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.Lookup("text_greet"); ok {
		t.Fatal("unexposed tool still in the registry")
	}
	res, err = call(t, reg, ToolInspect, "alice", `{"target":"tool:text_greet","view":"status"}`)
	if err != nil || res.Structured.(map[string]any)["callable_now"] != false || res.Structured.(map[string]any)["persisted"] != true {
		t.Fatalf("status: %v %v", res, err)
	}
	res, err = call(t, reg, ToolRegister, "alice", `{}`)
	if err != nil || res.Text != "Registered tools:\n- text_greet" {
		t.Fatalf("list: %v %v", res, err)
	}
	res, err = call(t, reg, ToolRegister, "alice", `{"name":"text_greet","template":null}`)
	if err != nil || !strings.HasPrefix(res.Text, "Deleted tool") {
		t.Fatalf("delete: %v %v", res, err)
	}
	res, _ = call(t, reg, ToolRegister, "alice", `{"name":"text_greet","template":""}`)
	if res.Text != `Tool "text_greet" not found.` {
		t.Fatalf("delete again: %v", res.Text)
	}

	// An async tool launches a Run owned by the caller.
	if _, err := call(t, reg, ToolRegister, "alice", `{"name":"job_echo","template":"echo {msg}","args":"msg","async":true,"description":"Echo job"}`); err != nil {
		t.Fatal(err)
	}
	res, err = call(t, reg, "job_echo", "alice", `{"msg":"hi","run_id":"echo1"}`)
	if err != nil || !strings.Contains(res.Text, "launch_kind=tool") {
		t.Fatal(res, err)
	}
	f.waitEnded("echo1")
	if s := f.status("alice", "echo1"); s != StatusDone {
		t.Fatalf("async tool run: %s", s)
	}
	if _, err := call(t, reg, ToolInspect, "bob", `{"target":"run:echo1","view":"trace"}`); toolCode(err) != CodeNotFound {
		t.Fatalf("bob sees alice's run: %v", err)
	}
	// Spawn and control through the tools.
	res, err = call(t, reg, ToolSpawn, "alice", `{"template":"sleep 300","as":"run:svc"}`)
	if err != nil || !strings.HasPrefix(res.Text, "run=svc status=running") {
		t.Fatalf("spawn: %v %v", res, err)
	}
	res, err = call(t, reg, ToolControl, "alice", `{"target":"run:svc","action":"kill"}`)
	if err != nil || !strings.Contains(res.Text, "status=accepted") {
		t.Fatalf("kill: %v %v", res, err)
	}
	f.waitEnded("svc")
}

func TestSplitArgs(t *testing.T) {
	got := strings.Join(splitArgs("file:path, mode:enum(a,b)=a ,n:int"), "|")
	if got != "file:path|mode:enum(a,b)=a|n:int" {
		t.Fatal(got)
	}
}
