package view

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/assent-run/assent/screen/field"
	"github.com/assent-run/assent/screen/render"
)

// TestPageNeedsNoNetwork: the document refers to nothing outside itself, so
// a host's default policy, which allows no network, draws it.
func TestPageNeedsNoNetwork(t *testing.T) {
	page := string(Page(Config{
		Tools:    []string{"orders.cancel"},
		Pictures: map[string]string{"logo": "data:image/png;base64,iVBORw0KGgo="},
		CSS:      ".o-screen { color: red; }",
	}))
	scripts := regexp.MustCompile(`(?s)<script\b[^>]*>(.*?)</script>`)
	var code strings.Builder
	for _, m := range scripts.FindAllStringSubmatch(page, -1) {
		if !strings.HasPrefix(m[0], `<script type="application/json"`) {
			code.WriteString(m[1])
		}
	}
	markup := scripts.ReplaceAllString(page, "")
	if n := len(scripts.FindAllString(page, -1)); n != 4 {
		t.Fatalf("%d script elements; want config, tables, engine and view", n)
	}
	check := func(what, text string, refs ...string) {
		for _, r := range refs {
			re := regexp.MustCompile(r)
			if loc := re.FindStringIndex(text); loc != nil {
				t.Errorf("the %s reaches the network (%s): …%s…", what, r, text[max(0, loc[0]-60):min(len(text), loc[1]+60)])
			}
		}
	}
	check("markup", markup,
		`(?i)\s(src|href|action|formaction|poster|srcset|data|background)\s*=`,
		`(?i)url\(\s*['"]?\s*(https?:|//)`, `(?i)@import`, `(?i)@font-face`,
		`(?i)<(link|iframe|object|embed|base|img|audio|video|source|frame)\b`)
	check("script", code.String(),
		`\bfetch\s*\(`, `XMLHttpRequest`, `WebSocket`, `EventSource`, `sendBeacon`, `importScripts`,
		`\bimport\s*\(`, `\.(src|href)\s*=`, `new\s+Worker\b`, `window\.open\b`)
}

func TestPageKeepsEmbeddedTextInItsElements(t *testing.T) {
	page := string(Page(Config{Tools: []string{"a.b"}, CSS: "p{} </style><script>alert(1)</script>", Pictures: map[string]string{"x": "</script><script>alert(2)</script>"}}))
	if strings.Contains(page, "alert(2)</script>") || strings.Count(page, "<script") != 4+1 {
		// Four script elements, and the one "<script" written as text
		// inside the style element, which the style never closed.
		t.Fatal("text from the configuration closed its element")
	}
	if n := strings.Count(page, "</style>"); n != 1 {
		t.Fatalf("%d </style> in the page; want 1", n)
	}
}

func TestNoClose(t *testing.T) {
	for in, want := range map[string]string{
		"a</script>b":       `a<\/script>b`,
		"a</SCRIPT>b":       `a<\/SCRIPT>b`,
		"no end":            "no end",
		"</script></script": `<\/script><\/script`,
	} {
		if got := noClose(in, "</script"); got != want {
			t.Errorf("noClose(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestPageUsesNoForbiddenCode: the default policy of MCP Apps hosts
// allows neither eval nor WebAssembly.
func TestPageUsesNoForbiddenCode(t *testing.T) {
	for _, src := range []string{engineJS, viewJS} {
		for _, bad := range []string{"eval(", "new Function", "Function(", "WebAssembly", "setTimeout(\"", "importScripts"} {
			if strings.Contains(src, bad) {
				t.Errorf("a script uses %s", bad)
			}
		}
	}
}

// TestTablesComeFromGo: the engine's tables are the Go packages'.
func TestTablesComeFromGo(t *testing.T) {
	var tab struct {
		Components map[string]json.RawMessage `json:"components"`
		Messages   map[string]string          `json:"messages"`
		Words      map[string]string          `json:"words"`
		Limits     map[string]int             `json:"limits"`
	}
	if err := json.Unmarshal(Tables(), &tab); err != nil {
		t.Fatal(err)
	}
	if len(tab.Components) < 20 || tab.Components["Button"] == nil {
		t.Errorf("the catalog has %d components", len(tab.Components))
	}
	if tab.Messages["required"] != field.English()["required"] {
		t.Errorf("field messages: %v", tab.Messages)
	}
	if tab.Words["loading"] != render.WordLoading || tab.Words["fieldFallback"] == "" {
		t.Errorf("words: %v", tab.Words)
	}
	if tab.Limits["line"] == 0 || tab.Limits["nesting"] == 0 {
		t.Errorf("limits: %v", tab.Limits)
	}
	if !strings.Contains(string(Page(Config{})), string(Tables())) {
		t.Error("the page does not carry the tables")
	}
}
