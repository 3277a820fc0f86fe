package client_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/client"
	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store/sqlite"
	"github.com/assent-run/assent/wire"
)

// serve starts a server on a fresh data directory for an example and
// returns its address, an agent's token and a function that stops it.
func serve() (url, token string, stop func()) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "assent-example")
	if err != nil {
		log.Fatal(err)
	}
	db, err := sqlite.Open(ctx, filepath.Join(dir, "assent.db"))
	if err != nil {
		log.Fatal(err)
	}
	boot, err := auth.EnsureBootstrap(ctx, db, time.Now())
	if err != nil {
		log.Fatal(err)
	}
	srv, err := server.New(ctx, server.Config{DataDir: dir, Store: db})
	if err != nil {
		log.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	return hs.URL, boot.AgentToken, func() {
		hs.Close()
		srv.Close()
		db.Close()
		os.RemoveAll(dir)
	}
}

func Example() {
	url, token, stop := serve()
	defer stop()
	ctx := context.Background()

	c, err := client.New(url, token, nil)
	if err != nil {
		log.Fatal(err)
	}
	who, err := c.Whoami(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("principal kind:", who.Kind)

	// Every error answer is the server's own error, with a stable code.
	_, err = c.Control(ctx, control.Identity{FormID: "profile", ControlID: "plan"})
	if e, ok := client.AsError(err); ok && e.Code == wire.NotFound {
		fmt.Println(e.Status, e.Code)
	}
	// Output:
	// principal kind: agent
	// 404 not_found
}

func ExampleClient_Do() {
	url, token, stop := serve()
	defer stop()

	c, err := client.New(url, token, nil)
	if err != nil {
		log.Fatal(err)
	}
	// Any route by method and path, decoded into a type of your own.
	var health struct {
		Status string `json:"status"`
	}
	if err := c.Do(context.Background(), "GET", "/v1/health", nil, &health); err != nil {
		log.Fatal(err)
	}
	fmt.Println(health.Status)
	// Output: ok
}

// An agent proposes a Flow program with why and by when a person should
// decide; the proposal waits in the people's inbox.
func ExampleClient_LoadProgramWith() {
	url, token, stop := serve()
	defer stop()
	ctx := context.Background()

	c, err := client.New(url, token, nil)
	if err != nil {
		log.Fatal(err)
	}
	program := []byte(`{
  "schema_version": 1, "program_id": "door", "program_version": "1", "requires_runtime": ">=0.1.0",
  "capabilities": {"effects": ["state.assign"], "verifiers": ["conditions.match"], "capability_surface": ["state.write"]},
  "owned_resources": [],
  "objective_contracts": [{"objective": "open", "conditions": [{"facet": "phase", "statuses": ["known"], "values": ["open"]}]}],
  "transitions": [{
    "id": "open", "selection_class": "PROGRESS", "priority": 1, "source_phases": ["closed"], "target_phases": ["open"],
    "authority": ["agent"], "required_capabilities": ["state.write"], "effect": "state.assign", "verifier": "conditions.match",
    "assignments": [{"facet": "door.state", "value": "open"}],
    "prescription": {"operation": "open", "expected_postcondition": "the door is open"}
  }]
}`)
	loaded, proposal, err := c.LoadProgramWith(ctx, program, client.ProgramOptions{
		Reason:   "Let visitors in without waiting for the desk",
		Deadline: 24 * time.Hour,
	})
	if err != nil {
		log.Fatal(err)
	}
	if loaded == nil {
		fmt.Println(proposal.Status, proposal.Program.ProgramID, proposal.Program.Status)
		fmt.Println("a person decides within", time.Until(proposal.Deadline).Round(time.Hour))
	}
	// Output:
	// pending_approval door proposed
	// a person decides within 24h0m0s
}
