package route_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/server/route"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/sqlite"
	"github.com/assent-run/assent/wire"
)

func TestRoute(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	now := time.Now().UTC()
	add := func(p store.Principal) store.Principal {
		t.Helper()
		p.CreatedAt = now
		if err := db.Principals().CreatePrincipal(ctx, p, nil); err != nil {
			t.Fatal(err)
		}
		return p
	}
	owner := add(store.Principal{ID: "p_owner", Kind: store.KindHuman, Name: "Olga"})
	ada := add(store.Principal{ID: "p_ada", Kind: store.KindHuman, Name: "Ada"})
	ben := add(store.Principal{ID: "p_ben", Kind: store.KindHuman, Name: "Ben"})
	cy := add(store.Principal{ID: "p_cy", Kind: store.KindHuman, Name: "Cy"})
	add(store.Principal{ID: "p_bot", Kind: store.KindAgent, Name: "bot", Supervisors: []string{"p_ada", "p_ben"}})
	add(store.Principal{ID: "p_orphan", Kind: store.KindAgent, Name: "orphan"})
	add(store.Principal{ID: "p_default", Kind: store.KindAgent, Name: "default", Supervisors: []string{"p_owner"}})
	add(store.Principal{ID: "p_workspace", Kind: store.KindAgent, Name: "agent", Supervisors: []string{"p_owner"}})
	if err := db.Settings().SetSetting(ctx, auth.SettingOwner, owner.ID); err != nil {
		t.Fatal(err)
	}
	if err := db.Settings().SetSetting(ctx, auth.SettingAgent, "p_workspace"); err != nil {
		t.Fatal(err)
	}
	if err := db.Groups().AddGroupMember(ctx, store.GroupMember{Group: "finance", PrincipalID: cy.ID, AddedAt: now}); err != nil {
		t.Fatal(err)
	}
	rt := route.Router{Principals: db.Principals(), Groups: db.Groups(), Settings: db.Settings()}
	bot := store.Principal{ID: "p_bot", Kind: store.KindAgent}
	for _, tc := range []struct {
		name, filer, group string
		label              string
		allowed, refused   []store.Principal
	}{
		{"supervisors", "p_bot", "", "Asked of: Ada, Ben", []store.Principal{ada, ben, owner}, []store.Principal{cy, bot}},
		{"group", "p_bot", "finance", "Asked of group finance: Cy", []store.Principal{cy, owner}, []store.Principal{ada, ben}},
		{"empty group leaves it to the owner", "p_bot", "legal", "Asked of group legal", []store.Principal{owner}, []store.Principal{ada, cy}},
		{"no supervisors", "p_orphan", "", "Asked of: any person", []store.Principal{owner, ada}, []store.Principal{bot}},
		{"supervised by the owner alone", "p_default", "", "Asked of: Olga", []store.Principal{owner}, []store.Principal{ada, cy, bot}},
		{"the workspace's own agent", "p_workspace", "", "Asked of: any person", []store.Principal{owner, ada}, []store.Principal{bot}},
		{"filed by a person", "p_ada", "", "Asked of: any person", []store.Principal{ben, cy, owner}, []store.Principal{bot}},
		{"in-process application", "app:demo", "", "Asked of: any person", []store.Principal{ada, cy, owner}, []store.Principal{bot}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := rt.For(ctx, tc.filer, tc.group)
			if err != nil {
				t.Fatal(err)
			}
			if r.Label() != tc.label {
				t.Errorf("label = %q, want %q", r.Label(), tc.label)
			}
			for _, p := range tc.allowed {
				if err := rt.Check(ctx, p, tc.filer, tc.group); err != nil {
					t.Errorf("%s refused: %v", p.Name, err)
				}
			}
			for _, p := range tc.refused {
				var we *wire.Error
				if err := rt.Check(ctx, p, tc.filer, tc.group); !errors.As(err, &we) || we.Code != wire.NotRouted {
					t.Errorf("%s (%s) = %v, want not_routed", p.Name, p.ID, err)
				}
			}
		})
	}
	t.Run("flow approval groups", func(t *testing.T) {
		g := route.FlowGroups{Router: rt}
		for _, tc := range []struct {
			group, person string
			want          bool
		}{
			{"finance", cy.ID, true},
			{"finance", owner.ID, true},
			{"finance", ada.ID, false},
			{"legal", owner.ID, true},
			{"legal", ada.ID, false},
			{"finance", "", false},
		} {
			if got, err := g.IsMember(ctx, tc.group, tc.person); err != nil || got != tc.want {
				t.Errorf("IsMember(%s, %q) = %v, %v; want %v", tc.group, tc.person, got, err, tc.want)
			}
		}
	})
	t.Run("a revoked supervisor is asked no more", func(t *testing.T) {
		for _, id := range []string{"p_ben", "p_ada"} {
			if err := db.Principals().RevokePrincipal(ctx, id); err != nil {
				t.Fatal(err)
			}
			r, err := rt.For(ctx, "p_bot", "")
			if err != nil {
				t.Fatal(err)
			}
			if id == "p_ben" && r.Label() != "Asked of: Ada" || id == "p_ada" && r.Label() != "Asked of: Olga" {
				t.Errorf("after revoking %s: %q", id, r.Label())
			}
			ben.Revoked = true
			if r.Allows(ben) || r.Allows(cy) {
				t.Error("revoked Ben, or Cy, may decide")
			}
		}
	})
}
