package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
)

func testGroups(t *testing.T, open func(*testing.T) store.Store) {
	t.Run("members", func(t *testing.T) {
		g := open(t).Groups()
		for i, m := range []store.GroupMember{
			{Group: "finance", PrincipalID: "p_ben", AddedAt: at(2 * time.Second)},
			{Group: "finance", PrincipalID: "p_ada", AddedAt: at(time.Second)},
			{Group: "ops", PrincipalID: "p_ada", AddedAt: at(3 * time.Second)},
			{Group: "finance", PrincipalID: "p_ada", AddedAt: at(time.Hour)}, // again: no change
		} {
			if err := g.AddGroupMember(ctx(t), m); err != nil {
				t.Fatalf("add %d: %v", i, err)
			}
		}
		got, err := g.GroupMembers(ctx(t), "finance")
		if err != nil || !slices.Equal(got, []string{"p_ada", "p_ben"}) {
			t.Fatalf("finance = %v, %v; want [p_ada p_ben]", got, err)
		}
		if got, err := g.GroupMembers(ctx(t), "nobody"); err != nil || len(got) != 0 {
			t.Fatalf("unknown group = %v, %v", got, err)
		}
		all, err := g.ListGroupMembers(ctx(t))
		if err != nil || len(all) != 3 {
			t.Fatalf("list = %+v, %v", all, err)
		}
		if all[0].Group != "finance" || all[0].PrincipalID != "p_ada" || !all[0].AddedAt.Equal(at(time.Second)) || all[2].Group != "ops" {
			t.Errorf("list order or times = %+v", all)
		}
		if err := g.RemoveGroupMember(ctx(t), "finance", "p_ada"); err != nil {
			t.Fatal(err)
		}
		if err := g.RemoveGroupMember(ctx(t), "finance", "p_ada"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("remove again = %v, want ErrNotFound", err)
		}
		if got, _ := g.GroupMembers(ctx(t), "finance"); !slices.Equal(got, []string{"p_ben"}) {
			t.Errorf("after remove = %v", got)
		}
	})
	t.Run("bad names are refused", func(t *testing.T) {
		g := open(t).Groups()
		for _, name := range []string{"", "Finance", "-x", "a b", "a'; DROP TABLE person_groups; --"} {
			if err := g.AddGroupMember(ctx(t), store.GroupMember{Group: name, PrincipalID: "p_ada", AddedAt: epoch}); !errors.Is(err, store.ErrInvalid) {
				t.Errorf("add to %q = %v, want ErrInvalid", name, err)
			}
		}
		if err := g.AddGroupMember(ctx(t), store.GroupMember{Group: "ok", AddedAt: epoch}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("no principal = %v, want ErrInvalid", err)
		}
		if all, err := g.ListGroupMembers(ctx(t)); err != nil || len(all) != 0 {
			t.Errorf("refused adds stored %+v, %v", all, err)
		}
	})
}
