package sqlite

import (
	"context"
	"encoding/json"
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
		StagedAt: now, Value: json.RawMessage(`"pro"`), Base: json.RawMessage(`"free"`)}}
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
	c, ctx := db.ControlRegistry().(store.AuditedControls), b.Context()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		u, rec := stageUpdate(i)
		if _, err := c.SaveControlAudited(ctx, u, rec); err != nil {
			b.Fatal(err)
		}
	}
}
