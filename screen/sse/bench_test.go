package sse

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/assent-run/assent/screen"
)

// discard is a Sink that drops the text, so the benchmark measures the
// client alone.
type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) End() *screen.Document       { return nil }

// BenchmarkReadResponse reads a stream of 1,000 chunk events of about 40
// bytes of text each, with a ping every 50 events.
func BenchmarkReadResponse(b *testing.B) {
	var body strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&body, "event: chunk\ndata: {\"text\":\"t%d = Text(\\\"Line %d of the screen\\\")\\n\"}\n\n", i, i)
		if i%50 == 0 {
			body.WriteString(": ping\n\n")
		}
	}
	body.WriteString("event: done\ndata: {\"stopReason\":\"end_turn\",\"model\":\"mock\",\"ms\":12}\n\n")
	data := []byte(body.String())
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	c := new(Client)
	for b.Loop() {
		resp := &http.Response{StatusCode: 200, Body: io.NopCloser(&pieceReader{data: data, n: 1400})}
		if o := c.ReadResponse(context.Background(), resp, discard{}); !o.Done() {
			b.Fatalf("outcome %+v", o)
		}
	}
}
