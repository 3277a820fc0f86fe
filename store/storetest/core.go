package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/assent-run/assent/store"
)

func testPrincipals(t *testing.T, open func(*testing.T) store.Store) {
	st := open(t)
	ps := st.Principals()
	owner := store.Principal{ID: "p_owner", Kind: store.KindHuman, Name: "owner", Grants: []string{"human.approve", "state.write"}, CreatedAt: at(2 * time.Second)}
	agent := store.Principal{ID: "p_agent", Kind: store.KindAgent, Name: "agent", Grants: []string{"tool.invoke"}, Supervisors: []string{"p_owner"}, CreatedAt: at(3 * time.Second)}
	// Created first but older: the list is ordered by creation time.
	early := store.Principal{ID: "p_early", Kind: store.KindService, Name: "svc", CreatedAt: at(time.Second)}
	for _, c := range []struct {
		p   store.Principal
		tok []byte
	}{{owner, hash("tok-owner")}, {agent, hash("tok-agent")}, {early, nil}} {
		if err := ps.CreatePrincipal(ctx(t), c.p, c.tok); err != nil {
			t.Fatalf("CreatePrincipal(%s) = %v", c.p.ID, err)
		}
	}

	t.Run("create refused", func(t *testing.T) {
		tests := []struct {
			name string
			p    store.Principal
			want error
		}{
			{"existing id", store.Principal{ID: "p_owner", Kind: store.KindHuman, Name: "again", CreatedAt: epoch}, store.ErrConflict},
			{"unknown kind", store.Principal{ID: "p_robot", Kind: "robot", Name: "r", CreatedAt: epoch}, store.ErrInvalid},
			{"no id", store.Principal{Kind: store.KindAgent, Name: "anon", CreatedAt: epoch}, store.ErrInvalid},
		}
		for _, tc := range tests {
			if err := ps.CreatePrincipal(ctx(t), tc.p, hash("tok-"+tc.name)); !errors.Is(err, tc.want) {
				t.Errorf("%s: CreatePrincipal = %v, want %v", tc.name, err, tc.want)
			}
			// A refused principal leaves no token behind.
			if _, err := ps.PrincipalByToken(ctx(t), hash("tok-"+tc.name)); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: the refused principal's token resolves: %v", tc.name, err)
			}
		}
		got, err := ps.Principal(ctx(t), "p_owner")
		if err != nil || got.Name != "owner" {
			t.Errorf("a refused duplicate changed the principal: %+v, %v", got, err)
		}
	})

	t.Run("read back", func(t *testing.T) {
		for _, want := range []store.Principal{owner, agent, early} {
			got, err := ps.Principal(ctx(t), want.ID)
			if err != nil {
				t.Fatalf("Principal(%s) = %v", want.ID, err)
			}
			samePrincipal(t, got, want)
		}
		for _, tc := range []struct {
			tok  string
			want string
		}{{"tok-owner", "p_owner"}, {"tok-agent", "p_agent"}} {
			got, err := ps.PrincipalByToken(ctx(t), hash(tc.tok))
			if err != nil || got.ID != tc.want {
				t.Errorf("PrincipalByToken(%s) = %s, %v; want %s", tc.tok, got.ID, err, tc.want)
			}
		}
		if _, err := ps.PrincipalByToken(ctx(t), hash("tok-unknown")); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown token: %v, want ErrNotFound", err)
		}
		if _, err := ps.Principal(ctx(t), "p_unknown"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown id: %v, want ErrNotFound", err)
		}
		list, err := ps.ListPrincipals(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if ids := principalIDs(list); !slices.Equal(ids, []string{"p_early", "p_owner", "p_agent"}) {
			t.Errorf("ListPrincipals = %v, want oldest first", ids)
		}
	})

	t.Run("revoke", func(t *testing.T) {
		ss := st.Sessions()
		for _, p := range []string{"p_owner", "p_agent"} {
			if err := ss.CreateSession(ctx(t), hash("cookie-"+p), store.Session{PrincipalID: p, CSRF: "csrf", ExpiresAt: at(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			if err := ss.CreateSignInLink(ctx(t), hash("link-"+p), p, at(time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		if err := ps.RevokePrincipal(ctx(t), "p_agent"); err != nil {
			t.Fatalf("RevokePrincipal = %v", err)
		}
		if _, err := ps.PrincipalByToken(ctx(t), hash("tok-agent")); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a revoked token still resolves: %v", err)
		}
		if _, err := ss.Session(ctx(t), hash("cookie-p_agent"), epoch); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a revoked principal's session lives on: %v", err)
		}
		if _, err := ss.ConsumeSignInLink(ctx(t), hash("link-p_agent"), epoch); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a revoked principal's sign-in link still works: %v", err)
		}
		got, err := ps.Principal(ctx(t), "p_agent")
		if err != nil || !got.Revoked {
			t.Errorf("Principal after revoke = %+v, %v; want it kept, marked revoked", got, err)
		}
		// Revocation touches no one else.
		if p, err := ps.PrincipalByToken(ctx(t), hash("tok-owner")); err != nil || p.ID != "p_owner" || p.Revoked {
			t.Errorf("owner's token after revoking the agent = %+v, %v", p, err)
		}
		if _, err := ss.Session(ctx(t), hash("cookie-p_owner"), epoch); err != nil {
			t.Errorf("owner's session after revoking the agent: %v", err)
		}
		for _, id := range []string{"p_agent", "p_unknown"} {
			if err := ps.RevokePrincipal(ctx(t), id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("RevokePrincipal(%s) = %v, want ErrNotFound", id, err)
			}
		}
	})

	t.Run("concurrent create", func(t *testing.T) {
		errs := race(8, func(i int) error {
			p := store.Principal{ID: "p_raced", Kind: store.KindAgent, Name: fmt.Sprint("racer-", i), CreatedAt: epoch}
			return ps.CreatePrincipal(ctx(t), p, hash(fmt.Sprint("tok-raced-", i)))
		})
		winner := exactlyOne(t, "CreatePrincipal of one id", errs, store.ErrConflict)
		for i := range errs {
			got, err := ps.PrincipalByToken(ctx(t), hash(fmt.Sprint("tok-raced-", i)))
			switch {
			case i == winner && (err != nil || got.Name != fmt.Sprint("racer-", i)):
				t.Errorf("winner's token = %+v, %v", got, err)
			case i != winner && !errors.Is(err, store.ErrNotFound):
				t.Errorf("loser %d's token resolves: %+v, %v", i, got, err)
			}
		}
	})
}

func samePrincipal(t *testing.T, got, want store.Principal) {
	t.Helper()
	if got.ID != want.ID || got.Kind != want.Kind || got.Name != want.Name || got.Revoked != want.Revoked ||
		!slices.Equal(got.Grants, want.Grants) || !slices.Equal(got.Supervisors, want.Supervisors) ||
		!got.CreatedAt.Equal(want.CreatedAt) {
		t.Errorf("principal %s read back as\n\t%+v\nwant\n\t%+v", want.ID, got, want)
	}
}

func principalIDs(list []store.Principal) []string {
	ids := make([]string, len(list))
	for i, p := range list {
		ids[i] = p.ID
	}
	return ids
}

func testSignInLinks(t *testing.T, open func(*testing.T) store.Store) {
	st := open(t)
	if err := st.Principals().CreatePrincipal(ctx(t), store.Principal{ID: "p_1", Kind: store.KindHuman, Name: "pat", CreatedAt: epoch}, nil); err != nil {
		t.Fatal(err)
	}
	ss := st.Sessions()
	expires := at(15 * time.Minute)
	for _, name := range []string{"link-a", "link-b", "link-raced"} {
		if err := ss.CreateSignInLink(ctx(t), hash(name), "p_1", expires); err != nil {
			t.Fatalf("CreateSignInLink(%s) = %v", name, err)
		}
	}
	tests := []struct {
		name string
		link string
		now  time.Time
		want error
	}{
		{"unknown", "link-none", epoch, store.ErrNotFound},
		{"at expiry", "link-a", expires, store.ErrNotFound},
		{"after expiry", "link-a", expires.Add(time.Second), store.ErrNotFound},
		{"live", "link-a", expires.Add(-time.Millisecond), nil},
		{"used", "link-a", epoch, store.ErrNotFound},
		{"another live", "link-b", epoch, nil},
	}
	for _, tc := range tests {
		id, err := ss.ConsumeSignInLink(ctx(t), hash(tc.link), tc.now)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: ConsumeSignInLink = %q, %v; want %v", tc.name, id, err, tc.want)
		}
		if err == nil && id != "p_1" {
			t.Errorf("%s: ConsumeSignInLink = %q, want p_1", tc.name, id)
		}
	}
	errs := race(8, func(int) error {
		_, err := ss.ConsumeSignInLink(ctx(t), hash("link-raced"), epoch)
		return err
	})
	exactlyOne(t, "ConsumeSignInLink of one link", errs, store.ErrNotFound)
}

func testSessions(t *testing.T, open func(*testing.T) store.Store) {
	st := open(t)
	if err := st.Principals().CreatePrincipal(ctx(t), store.Principal{ID: "p_1", Kind: store.KindHuman, Name: "pat", CreatedAt: epoch}, nil); err != nil {
		t.Fatal(err)
	}
	ss := st.Sessions()
	want := store.Session{PrincipalID: "p_1", CSRF: "csrf-1", ExpiresAt: at(time.Hour)}
	if err := ss.CreateSession(ctx(t), hash("cookie"), want); err != nil {
		t.Fatalf("CreateSession = %v", err)
	}
	tests := []struct {
		name   string
		cookie string
		now    time.Time
		want   error
	}{
		{"live", "cookie", epoch, nil},
		{"just before expiry", "cookie", want.ExpiresAt.Add(-time.Millisecond), nil},
		{"at expiry", "cookie", want.ExpiresAt, store.ErrNotFound},
		{"unknown", "cookie-none", epoch, store.ErrNotFound},
	}
	for _, tc := range tests {
		got, err := ss.Session(ctx(t), hash(tc.cookie), tc.now)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Session = %+v, %v; want %v", tc.name, got, err, tc.want)
		}
		if err == nil && (got.PrincipalID != want.PrincipalID || got.CSRF != want.CSRF || !got.ExpiresAt.Equal(want.ExpiresAt)) {
			t.Errorf("%s: Session = %+v, want %+v", tc.name, got, want)
		}
	}
	if err := ss.DeleteSession(ctx(t), hash("cookie")); err != nil {
		t.Fatalf("DeleteSession = %v", err)
	}
	if _, err := ss.Session(ctx(t), hash("cookie"), epoch); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Session after DeleteSession = %v, want ErrNotFound", err)
	}
	if err := ss.DeleteSession(ctx(t), hash("cookie-none")); err != nil {
		t.Errorf("DeleteSession of an unknown session = %v, want nil", err)
	}
}

func testSettings(t *testing.T, open func(*testing.T) store.Store) {
	set := open(t).Settings()
	if v, err := set.Setting(ctx(t), "owner"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing setting = %q, %v; want ErrNotFound", v, err)
	}
	steps := []struct{ name, value string }{
		{"owner", "p_1"},
		{"owner", "p_2"}, // replaces
		{"empty", ""},    // an empty value is a value
	}
	for _, s := range steps {
		if err := set.SetSetting(ctx(t), s.name, s.value); err != nil {
			t.Fatalf("SetSetting(%s) = %v", s.name, err)
		}
	}
	for name, want := range map[string]string{"owner": "p_2", "empty": ""} {
		if v, err := set.Setting(ctx(t), name); err != nil || v != want {
			t.Errorf("Setting(%s) = %q, %v; want %q", name, v, err, want)
		}
	}
	errs := race(8, func(i int) error { return set.SetSetting(ctx(t), fmt.Sprint("k", i), fmt.Sprint("v", i)) })
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent SetSetting %d = %v", i, err)
		}
		if v, err := set.Setting(ctx(t), fmt.Sprint("k", i)); err != nil || v != fmt.Sprint("v", i) {
			t.Errorf("Setting(k%d) = %q, %v", i, v, err)
		}
	}
}

func testAudit(t *testing.T, open func(*testing.T) store.Store) {
	au := open(t).Audit()
	recs := []store.AuditRecord{
		{Time: at(1 * time.Second), PrincipalID: "p_a", Source: "mcp", FormID: "f1", ControlID: "c1", Action: "stage", OK: true, Detail: `{"v":1}`},
		{Time: at(2 * time.Second), PrincipalID: "p_h", Source: "web", FormID: "f1", ControlID: "c1", Action: "apply", OK: false, Reason: "stale"},
		{Time: at(3 * time.Second), PrincipalID: "p_a", Source: "http", FormID: "f2", Subject: "run:r1", Action: "undo", OK: true},
		{Time: at(4 * time.Second), PrincipalID: "p_h", Source: "web", FormID: "f2", ControlID: "c9", Action: "discard", OK: true},
	}
	var last int64
	for i := range recs {
		recs[i].Seq = 99 // ignored
		seq, err := au.AppendAudit(ctx(t), recs[i])
		if err != nil {
			t.Fatalf("AppendAudit = %v", err)
		}
		if seq <= last {
			t.Errorf("AppendAudit gave %d after %d; sequence numbers increase", seq, last)
		}
		recs[i].Seq, last = seq, seq
	}
	all, err := au.ListAudit(ctx(t), store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(recs) {
		t.Fatalf("ListAudit gave %d records, want %d", len(all), len(recs))
	}
	for i, got := range all {
		want := recs[i]
		if got.Seq != want.Seq || !got.Time.Equal(want.Time) || got.PrincipalID != want.PrincipalID || got.Source != want.Source ||
			got.FormID != want.FormID || got.ControlID != want.ControlID || got.Subject != want.Subject ||
			got.Action != want.Action || got.OK != want.OK || got.Reason != want.Reason || got.Detail != want.Detail {
			t.Errorf("record %d read back as\n\t%+v\nwant\n\t%+v", i, got, want)
		}
	}
	seqs := func(idx ...int) []int64 {
		out := []int64{}
		for _, i := range idx {
			out = append(out, recs[i].Seq)
		}
		return out
	}
	tests := []struct {
		name string
		f    store.AuditFilter
		want []int64
	}{
		{"form", store.AuditFilter{FormID: "f1"}, seqs(0, 1)},
		{"principal", store.AuditFilter{PrincipalID: "p_h"}, seqs(1, 3)},
		{"form and principal", store.AuditFilter{FormID: "f2", PrincipalID: "p_a"}, seqs(2)},
		{"after", store.AuditFilter{AfterSeq: recs[1].Seq}, seqs(2, 3)},
		{"limit", store.AuditFilter{Limit: 3}, seqs(0, 1, 2)},
		{"after and limit", store.AuditFilter{AfterSeq: recs[0].Seq, Limit: 2}, seqs(1, 2)},
		{"no match", store.AuditFilter{FormID: "f9"}, seqs()},
	}
	for _, tc := range tests {
		list, err := au.ListAudit(ctx(t), tc.f)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		got := []int64{}
		for _, r := range list {
			got = append(got, r.Seq)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: ListAudit = %v, want %v", tc.name, got, tc.want)
		}
	}

	t.Run("concurrent appends and the list bound", func(t *testing.T) {
		// Enough concurrent appends to pass AuditListMax, from writers
		// racing each other.
		const writers = 8
		per := (store.AuditListMax+writers)/writers + 1
		var got [writers][]int64
		errs := race(writers, func(w int) error {
			for i := range per {
				seq, err := au.AppendAudit(ctx(t), store.AuditRecord{Time: epoch, PrincipalID: fmt.Sprint("w", w), Source: "mcp", FormID: "bulk", Action: fmt.Sprint("a", i), OK: true})
				if err != nil {
					return err
				}
				got[w] = append(got[w], seq)
			}
			return nil
		})
		for w, err := range errs {
			if err != nil {
				t.Fatalf("writer %d: %v", w, err)
			}
		}
		seen := map[int64]bool{}
		for w := range got {
			for _, seq := range got[w] {
				if seen[seq] {
					t.Fatalf("sequence number %d given twice", seq)
				}
				seen[seq] = true
			}
		}
		for _, limit := range []int{0, -1, store.AuditListMax + 1} {
			list, err := au.ListAudit(ctx(t), store.AuditFilter{FormID: "bulk", Limit: limit})
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != store.AuditListMax {
				t.Errorf("ListAudit with Limit %d gave %d records, want AuditListMax (%d)", limit, len(list), store.AuditListMax)
			}
			for i := 1; i < len(list); i++ {
				if list[i].Seq <= list[i-1].Seq {
					t.Fatalf("ListAudit out of order at %d: %d after %d", i, list[i].Seq, list[i-1].Seq)
				}
			}
		}
		// Paging with AfterSeq reaches every record exactly once.
		var after int64
		n := 0
		for {
			list, err := au.ListAudit(ctx(t), store.AuditFilter{FormID: "bulk", AfterSeq: after, Limit: 300})
			if err != nil {
				t.Fatal(err)
			}
			if len(list) == 0 {
				break
			}
			for _, r := range list {
				if !seen[r.Seq] {
					t.Fatalf("paging gave sequence number %d, which no append returned", r.Seq)
				}
			}
			n += len(list)
			after = list[len(list)-1].Seq
		}
		if n != len(seen) {
			t.Errorf("paging gave %d records, want %d", n, len(seen))
		}
	})
}
