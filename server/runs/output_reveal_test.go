package runs_test

import (
	"context"
	"strings"
	"testing"

	"github.com/assent-run/assent/run"
)

// TestRunPageRevealsHiddenCharacters: a Run prints text with a
// right-to-left override and a zero-width space, which would make its
// output tail read as something else than what it printed. The Run page
// draws each as a visible escape.
func TestRunPageRevealsHiddenCharacters(t *testing.T) {
	f := newFixture(t, nil)
	// \342\200\256 is U+202E, \342\200\213 is U+200B, \342\200\254 is U+202C.
	f.writeRecipe("bidi", `{"template":"printf 'paid to \\342\\200\\256KCAB\\342\\200\\254 ok\\342\\200\\213\\n'; printf 'err \\342\\200\\256x\\n' >&2"}`)
	if _, err := f.Srv.Runs().Manager().Spawn(context.Background(), f.Boot.Agent.ID, run.SpawnRequest{Recipe: "bidi", RunID: "bidi-1"}); err != nil {
		t.Fatal(err)
	}
	f.waitRun(f.Boot.Agent.ID, "bidi-1", func(v *run.Run) bool { return v.EndedAt != "" })
	cookie, _ := f.SignIn()
	page := webBody(f.Get("/runs/bidi-1", cookie))
	for _, want := range []string{"paid to ", "⟨U+202E⟩</span>KCAB", "⟨U+202C⟩", "⟨U+200B⟩", "err "} {
		if !strings.Contains(page, want) {
			t.Errorf("the Run page lacks %q", want)
		}
	}
	for _, raw := range []string{"\u202e", "\u202c", "\u200b"} {
		if strings.Contains(page, raw) {
			t.Errorf("the Run page draws %U raw", []rune(raw)[0])
		}
	}
	if t.Failed() {
		i := strings.Index(page, "Output")
		t.Fatalf("page output: %s", page[i:min(len(page), i+800)])
	}
}
