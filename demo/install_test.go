package demo_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/demo"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store/sqlite"
)

// TestOnlyInstallBringsTheDemo: a server alone carries nothing of the
// demo; Install adds each thing it brings through the parts.
func TestOnlyInstallBringsTheDemo(t *testing.T) {
	ctx := context.Background()
	has := func(srv *server.Server) map[string]bool {
		_, expenseErr := srv.Flows().Kernel().Instance(ctx, demo.ExpenseID)
		_, _, playerErr := srv.Runs().Manager().LoadRecipe("demo-player")
		_, _, deployErr := srv.Runs().Manager().LoadRecipe("deploy")
		return map[string]bool{
			"profile form":  srv.Controls().Hosts("profile"),
			"screens":       len(srv.Screens().LiveScreens()) == 4,
			"screen tool":   slices.Contains(srv.Screens().ToolNames(), "payments.confirm"),
			"expense":       expenseErr == nil,
			"player Recipe": playerErr == nil,
			"deploy Recipe": deployErr == nil,
		}
	}
	for what, ok := range has(assenttest.Start(t, nil).Srv) {
		if ok {
			t.Errorf("a server without the demo has its %s", what)
		}
	}
	for what, ok := range has(assenttest.StartDemo(t).Srv) {
		if !ok {
			t.Errorf("the demo did not install its %s", what)
		}
	}
}

// ExampleInstall embeds assent in a Go program with the demo: build the
// server, install the application, seed the inbox, then serve.
func ExampleInstall() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "assent-demo-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	db, err := sqlite.Open(ctx, filepath.Join(dir, "assent.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	if _, err := auth.EnsureBootstrap(ctx, db, time.Now()); err != nil {
		fmt.Println(err)
		return
	}
	cfg := server.Config{DataDir: dir, Store: db}
	srv, err := server.New(ctx, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	app, err := demo.Install(ctx, srv, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	seeded, err := app.Seed(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(seeded.Proposal, seeded.ApprovalStatus)
	// srv.Serve(ctx, ln) would serve it now.
	// Output: profile/plan pending
}
