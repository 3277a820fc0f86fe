package host

import (
	"testing"

	"github.com/assent-run/assent/event"
)

func TestAppendSSE(t *testing.T) {
	tests := []struct {
		e    event.Event
		want string
	}{
		{event.Event{Seq: 1, Type: "bench.tick", Data: []byte(`{"t":1}`)}, "id: 1\nevent: bench.tick\ndata: {\"t\":1}\n\n"},
		{event.Event{Seq: 9876543210, Type: "run.status"}, "id: 9876543210\nevent: run.status\ndata: {}\n\n"},
		{event.Event{Seq: 0, Type: event.Lagged, Data: []byte(`{"missed":3}`)}, "id: 0\nevent: " + event.Lagged + "\ndata: {\"missed\":3}\n\n"},
	}
	for _, tc := range tests {
		if got := string(appendSSE(nil, &tc.e)); got != tc.want {
			t.Errorf("appendSSE(%+v) = %q, want %q", tc.e, got, tc.want)
		}
	}
	// Appending keeps what the buffer holds.
	e := event.Event{Seq: 2, Type: "a"}
	if got := string(appendSSE([]byte("x"), &e)); got != "xid: 2\nevent: a\ndata: {}\n\n" {
		t.Errorf("appendSSE after x = %q", got)
	}
}

func BenchmarkAppendSSE(b *testing.B) {
	e := event.Event{Seq: 123456, Type: "bench.tick", Data: []byte(`{"t":1700000000000000000}`)}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendSSE(buf[:0], &e)
	}
}
