package oauth

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/sqlite"
)

// TestPruneRevokesOrphans: an agent principal whose person consented but
// whose client never exchanged the code is revoked once the code expired;
// one whose code was exchanged is kept.
func TestPruneRevokesOrphans(t *testing.T) {
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &Server{
		h: Deps{
			Gate:  storeGate{p: db.Principals()},
			Store: Stores{Principals: db.Principals(), Audit: db.Audit(), OAuth: db.OAuth()},
			Log:   slog.New(slog.NewTextHandler(io.Discard, nil)),
			Now:   func() time.Time { return now },
		},
		st: db.OAuth(),
	}
	for _, id := range []string{"p_orphan", "p_used"} {
		if err := db.Principals().CreatePrincipal(t.Context(), store.Principal{ID: id, Kind: store.KindAgent, Name: id, CreatedAt: now}, nil); err != nil {
			t.Fatal(err)
		}
		if err := db.OAuth().CreateOAuthGrant(t.Context(), hashOf(id), store.OAuthGrant{Kind: store.OAuthCode, ClientID: "c", PrincipalID: id, ExpiresAt: now.Add(DefaultCodeTTL)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.OAuth().UseOAuthGrant(t.Context(), hashOf("p_used"), store.OAuthCode, now); err != nil {
		t.Fatal(err)
	}
	s.pruneSometimes(t.Context())
	if p, _ := db.Principals().Principal(t.Context(), "p_orphan"); p.Revoked {
		t.Fatal("revoked while its code could still be exchanged")
	}
	now = now.Add(pruneEvery + DefaultCodeTTL)
	s.pruneSometimes(t.Context())
	for id, want := range map[string]bool{"p_orphan": true, "p_used": false} {
		if p, err := db.Principals().Principal(t.Context(), id); err != nil || p.Revoked != want {
			t.Errorf("%s: revoked %v (%v), want %v", id, p.Revoked, err, want)
		}
	}
}

// TestConsenterLost: an authorization stands only while its person is an
// unrevoked person holding every grant the agent was given.
func TestConsenterLost(t *testing.T) {
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now().UTC()
	for _, p := range []store.Principal{
		{ID: "p_ana", Kind: store.KindHuman, Name: "ana", Grants: []string{"tool.invoke", "state.write"}, CreatedAt: now},
		{ID: "p_bo", Kind: store.KindHuman, Name: "bo", Grants: []string{"tool.invoke"}, CreatedAt: now},
		{ID: "p_svc", Kind: store.KindService, Name: "svc", Grants: []string{"tool.invoke", "state.write"}, CreatedAt: now},
	} {
		if err := db.Principals().CreatePrincipal(t.Context(), p, nil); err != nil {
			t.Fatal(err)
		}
	}
	s := &Server{h: Deps{Store: Stores{Principals: db.Principals()}}}
	agent := store.Principal{ID: "p_agent", Kind: store.KindAgent, Grants: []string{"tool.invoke", "state.write"}}
	for consenter, lost := range map[string]bool{"p_ana": false, "p_bo": true, "p_svc": true, "p_nobody": true, "": true} {
		why, err := s.consenterLost(t.Context(), agent, grantData{Consenter: consenter})
		if err != nil || (why != "") != lost {
			t.Errorf("consenter %q: %q, %v; want lost %v", consenter, why, err, lost)
		}
	}
}
