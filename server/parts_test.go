package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/assent-run/assent/server/controls"
	"github.com/assent-run/assent/server/flows"
	"github.com/assent-run/assent/server/oauth"
	"github.com/assent-run/assent/server/runs"
	"github.com/assent-run/assent/server/screens"
)

// TestPartsRefuseMissingDeps: a part built without what it needs is
// refused when it is built, naming what is missing, rather than failing
// on the first request that reaches for it.
func TestPartsRefuseMissingDeps(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		build func() error
	}{
		{"controls", func() error { _, err := controls.New(ctx, controls.Deps{}); return err }},
		{"screens", func() error { _, err := screens.New(ctx, screens.Deps{}); return err }},
		{"runs", func() error { _, err := runs.New(ctx, runs.Deps{}); return err }},
		{"flows", func() error { _, err := flows.New(ctx, flows.Deps{}); return err }},
		{"oauth", func() error { _, err := oauth.New(oauth.Deps{}, oauth.Options{}); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.build()
			if err == nil || !strings.Contains(err.Error(), "built without Gate") {
				t.Fatalf("built with no deps: %v", err)
			}
		})
	}
}
