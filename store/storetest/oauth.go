package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
)

func testOAuth(t *testing.T, open func(*testing.T) store.Store) {
	st := open(t)
	o := st.OAuth()
	agent := store.Principal{ID: "p_oauth", Kind: store.KindAgent, Name: "client", CreatedAt: epoch}
	if err := st.Principals().CreatePrincipal(ctx(t), agent, nil); err != nil {
		t.Fatal(err)
	}

	t.Run("clients", func(t *testing.T) {
		c := store.OAuthClient{ID: "c_1", Metadata: []byte(`{"redirect_uris":["https://a.example/cb"]}`), CreatedAt: at(time.Second)}
		if err := o.CreateOAuthClient(ctx(t), c); err != nil {
			t.Fatal(err)
		}
		if err := o.CreateOAuthClient(ctx(t), c); !errors.Is(err, store.ErrConflict) {
			t.Errorf("second CreateOAuthClient = %v, want ErrConflict", err)
		}
		got, err := o.OAuthClient(ctx(t), "c_1")
		if err != nil || string(got.Metadata) != string(c.Metadata) || !got.CreatedAt.Equal(c.CreatedAt) {
			t.Errorf("OAuthClient = %+v, %v; want %+v", got, err, c)
		}
		if _, err := o.OAuthClient(ctx(t), "c_none"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown client: %v, want ErrNotFound", err)
		}
	})

	g := store.OAuthGrant{Kind: store.OAuthRefresh, ClientID: "c_1", PrincipalID: agent.ID, Data: []byte(`{"resource":"https://x/mcp"}`), ExpiresAt: at(time.Hour)}
	for _, name := range []string{"r1", "r2", "race", "x1", "xrace"} {
		if err := o.CreateOAuthGrant(ctx(t), hash(name), g); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("read and use", func(t *testing.T) {
		got, err := o.OAuthGrant(ctx(t), hash("r1"), store.OAuthRefresh, at(time.Minute))
		if err != nil || got.PrincipalID != agent.ID || got.ClientID != "c_1" || string(got.Data) != string(g.Data) || !got.ExpiresAt.Equal(g.ExpiresAt) {
			t.Fatalf("OAuthGrant = %+v, %v", got, err)
		}
		if _, err := o.OAuthGrant(ctx(t), hash("r1"), store.OAuthAccess, at(time.Minute)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("grant read as another kind: %v, want ErrNotFound", err)
		}
		if _, err := o.OAuthGrant(ctx(t), hash("r1"), store.OAuthRefresh, at(time.Hour)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("grant read at its expiry: %v, want ErrNotFound", err)
		}
		if _, err := o.UseOAuthGrant(ctx(t), hash("r1"), store.OAuthRefresh, at(time.Hour)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("grant used at its expiry: %v, want ErrNotFound", err)
		}
		if _, err := o.UseOAuthGrant(ctx(t), hash("r1"), store.OAuthRefresh, at(time.Minute)); err != nil {
			t.Fatalf("UseOAuthGrant = %v", err)
		}
		again, err := o.UseOAuthGrant(ctx(t), hash("r1"), store.OAuthRefresh, at(2*time.Minute))
		if !errors.Is(err, store.ErrConflict) || again.PrincipalID != agent.ID {
			t.Errorf("second use = %+v, %v; want the grant and ErrConflict", again, err)
		}
		if _, err := o.OAuthGrant(ctx(t), hash("r1"), store.OAuthRefresh, at(time.Minute)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("used grant still reads: %v", err)
		}
		if _, err := o.UseOAuthGrant(ctx(t), hash("none"), store.OAuthRefresh, at(time.Minute)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown grant: %v, want ErrNotFound", err)
		}
	})

	t.Run("concurrent use", func(t *testing.T) {
		errs := race(8, func(int) error {
			_, err := o.UseOAuthGrant(ctx(t), hash("race"), store.OAuthRefresh, at(time.Minute))
			return err
		})
		exactlyOne(t, "UseOAuthGrant", errs, store.ErrConflict)
	})

	t.Run("exchange", func(t *testing.T) {
		access := store.OAuthGrant{Kind: store.OAuthAccess, ClientID: "c_1", PrincipalID: agent.ID, Data: g.Data, ExpiresAt: at(time.Hour)}
		// A successor that cannot be stored (its hash is taken) leaves
		// the grant unspent: a retry can still exchange it.
		clash := []store.NewOAuthGrant{{Hash: hash("x-new"), Grant: access}, {Hash: hash("r2"), Grant: g}}
		if _, err := o.ExchangeOAuthGrant(ctx(t), hash("x1"), store.OAuthRefresh, at(time.Minute), clash); err == nil {
			t.Fatal("exchange whose successor clashes succeeded")
		}
		if _, err := o.OAuthGrant(ctx(t), hash("x-new"), store.OAuthAccess, at(time.Minute)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("successor of a failed exchange stored: %v", err)
		}
		next := []store.NewOAuthGrant{{Hash: hash("x-access"), Grant: access}, {Hash: hash("x-refresh"), Grant: g}}
		got, err := o.ExchangeOAuthGrant(ctx(t), hash("x1"), store.OAuthRefresh, at(time.Minute), next)
		if err != nil || got.PrincipalID != agent.ID {
			t.Fatalf("ExchangeOAuthGrant after a failed one = %+v, %v", got, err)
		}
		for _, n := range next {
			if _, err := o.OAuthGrant(ctx(t), n.Hash, n.Grant.Kind, at(time.Minute)); err != nil {
				t.Errorf("successor %s: %v", n.Grant.Kind, err)
			}
		}
		if _, err := o.ExchangeOAuthGrant(ctx(t), hash("x1"), store.OAuthRefresh, at(time.Minute), nil); !errors.Is(err, store.ErrConflict) {
			t.Errorf("second exchange = %v, want ErrConflict", err)
		}
		errs := race(8, func(i int) error {
			n := []store.NewOAuthGrant{{Hash: hash(fmt.Sprintf("xrace-%d", i)), Grant: access}}
			_, err := o.ExchangeOAuthGrant(ctx(t), hash("xrace"), store.OAuthRefresh, at(time.Minute), n)
			return err
		})
		exactlyOne(t, "ExchangeOAuthGrant", errs, store.ErrConflict)
	})

	t.Run("prune", func(t *testing.T) {
		for _, id := range []string{"p_orphan", "p_done", "p_waiting"} {
			if err := st.Principals().CreatePrincipal(ctx(t), store.Principal{ID: id, Kind: store.KindAgent, Name: id, CreatedAt: epoch}, nil); err != nil {
				t.Fatal(err)
			}
		}
		code := func(principal, client string, exp time.Duration) []byte {
			h := hash(principal + "-code")
			if err := o.CreateOAuthGrant(ctx(t), h, store.OAuthGrant{Kind: store.OAuthCode, ClientID: client, PrincipalID: principal, ExpiresAt: at(exp)}); err != nil {
				t.Fatal(err)
			}
			return h
		}
		code("p_orphan", "c_old_used", time.Minute)
		done := code("p_done", "c_old_used", time.Minute)
		code("p_waiting", "c_old_used", time.Hour)
		if _, err := o.UseOAuthGrant(ctx(t), done, store.OAuthCode, at(time.Second)); err != nil {
			t.Fatal(err)
		}
		for _, c := range []store.OAuthClient{{ID: "c_old_unused", CreatedAt: at(0)}, {ID: "c_old_used", CreatedAt: at(0)}, {ID: "c_new_unused", CreatedAt: at(time.Hour)}} {
			c.Metadata = []byte(`{}`)
			if err := o.CreateOAuthClient(ctx(t), c); err != nil {
				t.Fatal(err)
			}
		}
		ids, err := o.PruneOAuth(ctx(t), at(10*time.Minute), at(time.Minute))
		if err != nil || len(ids) != 1 || ids[0] != "p_orphan" {
			t.Errorf("PruneOAuth = %v, %v; want only p_orphan", ids, err)
		}
		for id, want := range map[string]error{"c_old_unused": store.ErrNotFound, "c_old_used": nil, "c_new_unused": nil} {
			if _, err := o.OAuthClient(ctx(t), id); !errors.Is(err, want) {
				t.Errorf("client %s after pruning: %v, want %v", id, err, want)
			}
		}
	})

	t.Run("revoked principal", func(t *testing.T) {
		if err := st.Principals().RevokePrincipal(ctx(t), agent.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := o.OAuthGrant(ctx(t), hash("r2"), store.OAuthRefresh, at(time.Minute)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("grant of a revoked principal reads: %v", err)
		}
		if _, err := o.UseOAuthGrant(ctx(t), hash("r2"), store.OAuthRefresh, at(time.Minute)); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("grant of a revoked principal used: %v", err)
		}
	})
}
