package screens_test

import (
	"context"
	"html"
	"io"
	"strings"
	"testing"

	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/server/screens"
)

// TestAgentScreenRevealsHiddenCharacters: an agent's screen hides what its
// text says with a right-to-left override and a zero-width space. The page
// draws each as a visible escape, in Text and in the other text a
// component shows; a field's value is left for the person to edit.
func TestAgentScreenRevealsHiddenCharacters(t *testing.T) {
	f := assenttest.Start(t, nil)
	stream := "root = Card([h, t, b], title=\"Pay\u200b\")\nh = Heading(\"Invoice \u202e1234\u202c\")\n" +
		"t = Text(\"Pay to \u202eKCAB\u202c now\")\nb = Badge(\"ok\u2066\")\n"
	id, err := f.Srv.Screens().Show(context.Background(), f.Boot.Agent, stream, screens.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cookie, _ := f.SignIn()
	resp := f.Get("/screens/"+id, cookie)
	b, _ := io.ReadAll(resp.Body)
	page := html.UnescapeString(string(b))
	for _, want := range []string{"Pay to ⟨U+202E⟩KCAB⟨U+202C⟩ now", "Invoice ⟨U+202E⟩1234⟨U+202C⟩", "Pay⟨U+200B⟩", "ok⟨U+2066⟩"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, raw := range []string{"\u202e", "\u202c", "\u200b", "\u2066"} {
		if strings.Contains(page, raw) {
			t.Errorf("the page draws %U raw", []rune(raw)[0])
		}
	}
}
