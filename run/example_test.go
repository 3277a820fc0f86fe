package run_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/assent-run/assent/run"
	"github.com/assent-run/assent/store/sqlite"
)

func ExampleNewEnvelope() {
	env, err := run.NewEnvelope("volume", json.RawMessage(`{ "percent": 40 }`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s", run.WireRecord("6f1c2d3e-0000-4000-8000-000000000000", env.Action, env.Input))

	_, err = run.NewEnvelope("volume", json.RawMessage(`"`+strings.Repeat("x", 379)+`"`))
	fmt.Println(err)
	// Output:
	// {"id":"6f1c2d3e-0000-4000-8000-000000000000","action":"volume","input":{"percent":40}}
	// control.input exceeds 380 serialized bytes
}

func ExampleDecodeTraceInput() {
	_, err := run.DecodeTraceInput([]byte(`{"kind":"progress.update","to":"coordinator"}`))
	fmt.Println(err)
	in, _ := run.DecodeTraceInput([]byte(`{"kind":"progress.update","summary":"3 of 10","attention":"notify"}`))
	fmt.Println(in.Kind, in.Summary, in.Attention)
	// Output:
	// Trace event fields are removed: to
	// progress.update 3 of 10 notify
}

func ExampleManager() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "assent-example-")
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(ctx, filepath.Join(dir, "assent.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	m, err := run.New(ctx, run.Config{Store: db, DataDir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()

	v, err := m.Spawn(ctx, "alice", run.SpawnRequest{Template: json.RawMessage(`"echo hello"`), RunID: "hello"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(v.ID, v.Generation)
	// Wait until the supervisor has recorded the end.
	for v.EndedAt == "" {
		time.Sleep(10 * time.Millisecond)
		v, _ = m.Status(ctx, "alice", "hello")
	}
	out, _ := m.Logs(ctx, "alice", "hello", "stdout", 0)
	fmt.Print(v.Status, " ", out)

	// Another principal cannot tell the Run exists.
	_, err = m.Status(ctx, "mallory", "hello")
	fmt.Println(err)
	// Output:
	// hello 1
	// done hello
	// Run not found: hello. List your Runs with inspect target=runtime view=runs.
}
