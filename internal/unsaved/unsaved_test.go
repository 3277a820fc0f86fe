package unsaved_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/internal/unsaved"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/store/sqlite"
)

func TestControlsSavesNothing(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "assent.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cs := unsaved.Controls(db).ControlRegistry()
	k := control.Key{FormID: "profile", ControlID: "plan"}
	u := control.Update{Key: k, Stage: &control.SavedProposal{Revision: 1, StagedAt: time.Now(), Value: json.RawMessage(`"pro"`), Base: json.RawMessage(`"free"`)}}
	if _, err := cs.SaveControlAudited(ctx, u, store.AuditRecord{Time: time.Now(), PrincipalID: "p", Source: "agent", Action: "stage", OK: true}, nil); err != nil {
		t.Fatal(err)
	}
	if err := cs.SaveControl(ctx, u); err != nil {
		t.Fatal(err)
	}
	got, err := db.ControlRegistry().LoadControl(ctx, k)
	if err != nil || got.Control.Proposal != nil || got.Revision != 0 {
		t.Errorf("after dropped writes the store holds %+v, %v; want nothing", got, err)
	}
	if recs, err := db.ListAudit(ctx, store.AuditFilter{}); err != nil || len(recs) != 0 {
		t.Errorf("audit log after dropped writes: %d records, %v; want none", len(recs), err)
	}
}
