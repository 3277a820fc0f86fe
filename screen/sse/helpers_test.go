package sse

import (
	"io"
	"strings"

	"github.com/assent-run/assent/screen"
)

// recorder is a Sink that feeds a real parser and records what it was given.
type recorder struct {
	p       *screen.Parser
	written strings.Builder
	ends    int
	// writeErr, when set, is returned by every Write.
	writeErr error
}

func newRecorder() *recorder { return &recorder{p: screen.NewParser(screen.Options{})} }

func (r *recorder) Write(b []byte) (int, error) {
	if r.writeErr != nil {
		return 0, r.writeErr
	}
	if r.ends > 0 {
		return 0, screen.ErrEnded
	}
	r.written.Write(b)
	return r.p.Write(b)
}

func (r *recorder) End() *screen.Document {
	r.ends++
	return r.p.End()
}

// pieceReader returns at most n bytes per Read (all of them when n is 0),
// to show that results don't depend on how a response is split.
type pieceReader struct {
	data []byte
	n    int
}

func (r *pieceReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	k := len(r.data)
	if r.n > 0 && k > r.n {
		k = r.n
	}
	k = copy(p, r.data[:k])
	r.data = r.data[k:]
	return k, nil
}

// readSizes are the read sizes every behaviour is tested with; 0 is the
// whole response in one read.
var readSizes = []int{0, 1, 5, 13}
