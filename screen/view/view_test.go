package view

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
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
		if !strings.HasPrefix(m[0], `<script type="application/octet-stream"`) {
			code.WriteString(m[1])
		}
	}
	markup := scripts.ReplaceAllString(page, "")
	if n := len(scripts.FindAllString(page, -1)); n != 4 {
		t.Fatalf("%d script elements; want config, engine, loader and view", n)
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

// TestEngineIsCurrent: the embedded engine is what go generate builds from
// today's sources. It builds the engine, so it is skipped in -short runs
// and when this toolchain is not the one that built the embedded engine.
func TestEngineIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the WebAssembly engine")
	}
	if runtime.Version() != EngineVersion() {
		t.Skipf("the engine was built by %s; this is %s", EngineVersion(), runtime.Version())
	}
	out := filepath.Join(t.TempDir(), "engine.wasm")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./engine")
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the engine: %v\n%s", err, b)
	}
	built, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(engineGz))
	if err != nil {
		t.Fatal(err)
	}
	embedded, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(built, embedded) {
		t.Fatal("the embedded engine is stale: run go generate ./screen/view and commit the result")
	}
	goroot, _ := exec.Command("go", "env", "GOROOT").Output()
	loader, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(goroot)), "lib", "wasm", "wasm_exec.js"))
	if err == nil && string(loader) != wasmExec {
		t.Fatal("wasm_exec.js differs from the toolchain's: run go generate ./screen/view")
	}
}
