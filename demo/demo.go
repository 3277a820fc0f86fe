// Package demo is assent's sample application: the workspace that
// "assent serve --demo" shows. It loads an expense-approval and a
// deployment Flow program with the payment tools and Recipes their
// transitions call, payment and sign-up screens, a profile form, and a
// player service a person can steer; Seed then puts one item of each
// kind in the owner's inbox.
//
// It embeds assent as any Go application does. An application builds the
// server with server.New, adds what it brings through the parts' exported
// methods, and then serves:
//
//	srv, err := server.New(ctx, cfg)
//	...
//	app, err := demo.Install(ctx, srv, cfg)
//	...
//	err = srv.Serve(ctx, ln)
//
// The demo reaches nothing inside the server: programs go in through
// Flows().Kernel(), its payment rail through Flows().RegisterEffectOnlyTool,
// its approval card through Flows().RegisterApprovalSummary, its screens
// and their tools through Screens(), its Recipes through
// Runs().Manager().PlaceRecipe and its form through Controls().DeclareForm.
// What it records (payments, sign-ups) lives in the App, not in the server.
package demo

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
)

// App is the demo installed on one server.
type App struct {
	srv *server.Server
	st  store.Store
	log *slog.Logger
	now func() time.Time

	mu sync.Mutex
	// payments are what payments_send recorded.
	payments []Payment
	// receipts counts the payments.confirm presses, signups the
	// accounts.signUp ones.
	receipts, signups int
}

// Install adds the demo to srv, which New built from cfg and which does
// not serve yet: the profile form, the player Recipe, the example
// programs with their tools, Recipes and first expense, and the screens
// with their tools and a generator of canned screens. What the store kept
// from an earlier start (the form, the screens, the expense, Recipes a
// person edited) is kept. Install a server's demo once.
func Install(ctx context.Context, srv *server.Server, cfg server.Config) (*App, error) {
	a := &App{srv: srv, st: cfg.Store, log: cfg.Logger, now: cfg.Now}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.st == nil {
		return nil, fmt.Errorf("demo: the server's configuration names no store")
	}
	if err := a.declareProfile(ctx); err != nil {
		return nil, fmt.Errorf("demo: the profile form: %w", err)
	}
	if err := a.placePlayerRecipe(); err != nil {
		a.log.Warn("demo player Recipe not written", "err", err)
	}
	if err := a.loadFlows(ctx); err != nil {
		return nil, fmt.Errorf("demo: flows: %w", err)
	}
	if err := a.loadScreens(ctx, cfg.DataDir); err != nil {
		return nil, fmt.Errorf("demo: screens: %w", err)
	}
	return a, nil
}

// NewServer builds a server from cfg (server.New) and installs the demo
// on it: the server "assent serve --demo" serves, before it serves.
func NewServer(ctx context.Context, cfg server.Config) (*server.Server, *App, error) {
	srv, err := server.New(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	app, err := Install(ctx, srv, cfg)
	if err != nil {
		srv.Close()
		return nil, nil, err
	}
	return srv, app, nil
}
