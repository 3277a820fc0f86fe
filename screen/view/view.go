// Package view builds the screen view: one self-contained HTML document
// that draws a screen inside an agent's host, through MCP Apps (SPEC
// 10.25–10.28).
//
// The document carries everything it needs — the engine (the screen
// package compiled to WebAssembly, see engine/), the script that talks to
// the host, the theme and the app's pictures as data URIs — and refers to
// nothing on the network, so it works under a host's default policy that
// allows none. The engine parses, checks fields and draws with the same
// code as the web UI, so a screen looks and behaves alike in both.
//
// The engine is compiled by go generate (gen.go) and embedded; a test
// checks the embedded build matches the sources when the toolchain is the
// one that built it.
package view

import (
	"bytes"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
)

//go:generate go run gen.go

// URI is the view's address as an MCP resource.
const URI = "ui://assent/screen-view.html"

// MIMEType is the MCP Apps profile of HTML.
const MIMEType = "text/html;profile=mcp-app"

var (
	//go:embed engine.wasm.gz
	engineGz []byte
	//go:embed wasm_exec.js
	wasmExec string
	//go:embed view.js
	viewJS string
	//go:embed view.css
	viewCSS string
	//go:embed engine.version
	engineVersion string
)

// Config is what a view knows of the app that serves it.
type Config struct {
	// Tools are the names of the tools screens' buttons may call.
	Tools []string `json:"tools"`
	// Pictures maps the app's picture names to data: URIs.
	Pictures map[string]string `json:"pictures,omitempty"`
	// Version is the serving runtime's version.
	Version string `json:"version,omitempty"`
	// CSS is the screen theme, as the web UI draws screens.
	CSS string `json:"-"`
}

// Page returns the view's HTML document for cfg.
func Page(cfg Config) []byte {
	conf, _ := json.Marshal(cfg) // escapes <, > and & so the JSON can't close its element
	var b bytes.Buffer
	b.Grow(len(engineGz)*4/3 + len(wasmExec) + len(viewJS) + len(cfg.CSS) + 4096)
	b.WriteString(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Screen</title>
<style>
`)
	b.WriteString(noClose(cfg.CSS, "</style"))
	b.WriteString("\n")
	b.WriteString(noClose(viewCSS, "</style"))
	b.WriteString(`
</style>
</head>
<body>
<main>
<p id="view-notice" class="o-notice o-tone-info" role="note" hidden></p>
<div id="screen-region" aria-live="off"></div>
<p id="screen-status" class="visually-hidden" role="status" aria-live="polite"></p>
<p id="screen-alert" class="o-alert" role="alert" hidden></p>
<dialog id="confirm-dialog" class="o-dialog" aria-labelledby="confirm-title" aria-describedby="confirm-sentence">
<h2 id="confirm-title">Confirm in assent</h2>
<p id="confirm-sentence">This action runs only after you confirm it in assent, where the app shows exactly what it will do.</p>
<div class="actions"><button type="button" id="confirm-cancel">Cancel</button> <button type="button" id="confirm-open" class="primary">Open assent</button></div>
</dialog>
</main>
<script type="application/json" id="view-config">`)
	b.Write(conf)
	b.WriteString(`</script>
<script type="application/octet-stream" id="view-engine">`)
	b.WriteString(engineText())
	b.WriteString("</script>\n<script>\n")
	b.WriteString(noClose(wasmExec, "</script"))
	b.WriteString("\n</script>\n<script>\n")
	b.WriteString(noClose(viewJS, "</script"))
	b.WriteString("\n</script>\n</body>\n</html>\n")
	return b.Bytes()
}

// engineText is the engine as the page carries it, encoded once.
var engineText = sync.OnceValue(func() string { return base64.StdEncoding.EncodeToString(engineGz) })

// EngineVersion is the Go toolchain that compiled the embedded engine.
func EngineVersion() string { return strings.TrimSpace(engineVersion) }

// noClose keeps s from closing the element it is written into.
func noClose(s, end string) string {
	if !strings.Contains(strings.ToLower(s), end) {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(strings.ToLower(s), end)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i+1])
		b.WriteString(`\`)
		s = s[i+1:]
	}
}
