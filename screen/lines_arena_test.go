package screen

import (
	"fmt"
	"strings"
	"testing"
)

func TestTextArena(t *testing.T) {
	for _, tc := range []struct {
		name  string
		texts []string
	}{
		{"empty", []string{""}},
		{"short lines across chunks", func() []string {
			var out []string
			for i := range 5000 {
				out = append(out, fmt.Sprintf("t%d = Text(\"Row %d\")", i, i))
			}
			return out
		}()},
		{"a line too long for a chunk", []string{"a", strings.Repeat("é", maxArenaText), "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a textArena
			buf := make([]byte, 0, 64)
			got := make([]string, len(tc.texts))
			for i, s := range tc.texts {
				// Reuse one buffer, as the line reader does.
				buf = append(buf[:0], s...)
				got[i] = a.make(buf)
				clear(buf)
			}
			for i, s := range tc.texts {
				if got[i] != s {
					t.Fatalf("text %d = %q, want %q", i, got[i], s)
				}
			}
		})
	}
}
