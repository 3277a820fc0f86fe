package confirm

import (
	"context"
	"testing"
)

func BenchmarkPress(b *testing.B) {
	r, err := NewRegistry(payTool(&recorder{}))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	params := map[string]any{"amount": 42.5, "note": "table 4", "email": "ada@example.com"}
	b.Run("Prepare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.Prepare(ctx, "payments.confirm", params, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("PrepareConfirm", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p, err := r.Prepare(ctx, "payments.confirm", params, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := p.Confirm(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("InvalidParams", func(b *testing.B) {
		bad := map[string]any{"amount": -1.0, "note": "table 4"}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.Prepare(ctx, "payments.confirm", bad, nil); err == nil {
				b.Fatal("no error")
			}
		}
	})
}
