package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/store"
)

// stageUpdate returns the update and audit record of the i-th stage of one
// control, as a server writes them for controls_execute.
func stageUpdate(i int) (control.Update, store.AuditRecord) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(i) * time.Millisecond)
	u := control.Update{Key: control.Key{FormID: "profile", ControlID: "plan"}, Stage: &control.SavedProposal{
		Revision: int64(i + 1), Provenance: control.Provenance{Source: control.SourceAgent, PrincipalID: "p_agent"},
		StagedAt: now, Value: json.RawMessage(`"pro"`), Base: json.RawMessage(`"free"`)},
		// The server's registry expects the proposal it replaces and the
		// value it stages against.
		Expect: control.Expect{Proposal: true, Revision: int64(i), Value: json.RawMessage(`"free"`)}}
	rec := store.AuditRecord{Time: now, PrincipalID: "p_agent", Source: "agent", FormID: "profile", ControlID: "plan",
		Action: "stage", OK: true, Detail: `{"value":"pro"}`}
	return u, rec
}

// BenchmarkStageThenAudit measures a staged value saved and its audit
// record appended in two transactions.
func BenchmarkStageThenAudit(b *testing.B) {
	db := openTest(b)
	// A server writes under its request's context, which can end.
	c, ctx := db.ControlRegistry(), b.Context()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		u, rec := stageUpdate(i)
		if err := c.SaveControl(ctx, u); err != nil {
			b.Fatal(err)
		}
		if _, err := db.AppendAudit(context.WithoutCancel(ctx), rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStageAudited measures a staged value saved with its audit
// record in one transaction.
func BenchmarkStageAudited(b *testing.B) {
	db := openTest(b)
	c, ctx := db.ControlRegistry(), b.Context()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		u, rec := stageUpdate(i)
		if _, err := c.SaveControlAudited(ctx, u, rec, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// loadAll is a control.Persister without the per-control and per-form
// reads, so a registry on it reads everything to refresh one control.
type loadAll struct{ control.Persister }

// BenchmarkRefresh measures Registry.Refresh of one control while many
// saved controls have open proposals and undo histories: with the
// store's per-control read, and with a read of everything.
func BenchmarkRefresh(b *testing.B) {
	for _, saved := range []int{10, 1000} {
		for _, tc := range []struct {
			name string
			wrap func(store.Controls) control.Persister
		}{
			{"per-control", func(c store.Controls) control.Persister { return c }},
			{"load-all", func(c store.Controls) control.Persister { return loadAll{c} }},
		} {
			b.Run(fmt.Sprintf("saved=%d/%s", saved, tc.name), func(b *testing.B) {
				db := openTest(b)
				c, ctx := db.ControlRegistry(), b.Context()
				at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
				for i := range saved {
					k := control.Key{FormID: "bench", ControlID: fmt.Sprint("c", i)}
					p := &control.SavedProposal{Revision: int64(i + 1), StagedAt: at, Value: json.RawMessage(`"v"`), Base: json.RawMessage(`"b"`)}
					e := &control.SavedChange{Action: control.Apply, Previous: json.RawMessage(`"a"`), Applied: json.RawMessage(`"b"`), At: at}
					if err := c.SaveControl(ctx, control.Update{Key: k, Stage: p, Push: e, Depth: 10}); err != nil {
						b.Fatal(err)
					}
				}
				r := control.New(control.Config{Store: tc.wrap(c)})
				v := control.NewValue("b")
				id := control.Identity{FormID: "bench", ControlID: "c0"}
				if _, err := r.Register(control.Registration{Identity: id, Metadata: control.Metadata{Kind: control.KindText}, Handles: v.Handles()}); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if err := r.Refresh(ctx, id.Key()); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
