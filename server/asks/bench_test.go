package asks

import (
	"encoding/json"
	"testing"
)

// BenchmarkAskAndAnswer measures one question's life on SQLite: filed by
// an agent, answered by a person (two durable writes and their events).
func BenchmarkAskAndAnswer(b *testing.B) {
	p, _, _ := newPartTB(b)
	ctx := b.Context()
	b.ResetTimer()
	for b.Loop() {
		a, err := p.Ask(ctx, agent, Request{Question: "Which?", Options: []string{"Post", "Courier"}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Decide(ctx, ada, a, Decision{Approve: true, Answer: json.RawMessage(`"Post"`)}); err != nil {
			b.Fatal(err)
		}
	}
}
