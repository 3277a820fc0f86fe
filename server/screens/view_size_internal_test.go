package screens

import (
	"io/fs"
	"testing"

	"github.com/assent-run/assent/screen/view"
	"github.com/assent-run/assent/server/internal/host"
)

// TestViewPageIsSmall: hosts read the view's resource on every show, so
// it stays under 150 KB with the web UI's screen theme, which the part
// gives it.
func TestViewPageIsSmall(t *testing.T) {
	css, err := fs.ReadFile(host.StaticFS, "static/screen.css")
	if err != nil {
		t.Fatal(err)
	}
	page := view.Page(view.Config{Tools: []string{"payments.confirm"}, CSS: string(css)})
	if n := len(page); n > 150<<10 {
		t.Fatalf("the view is %d bytes; keep it under %d", n, 150<<10)
	}
	t.Logf("the view is %d bytes with the screen theme", len(page))
}
