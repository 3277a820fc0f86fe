// Package view builds the screen view: one self-contained HTML document
// that draws a screen inside an agent's host, through MCP Apps (SPEC
// 10.25–10.28).
//
// The document carries everything it needs — the engine (engine.js: the
// stream reader, field checks and drawing), the script that talks to the
// host (view.js), the theme and the app's pictures as data URIs — and
// refers to nothing on the network. Both scripts are plain inline script:
// no eval, no new Function, no WebAssembly, so the page runs under the
// default policy of MCP Apps hosts.
//
// The tables the engine checks against — the catalog, limits, reserved
// words, issue severities, field messages and the renderer's words — are
// written into the page from the Go packages that own them (see Tables),
// so the engine cannot drift from the Go reader on them.
package view

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"strings"
	"sync"

	"github.com/assent-run/assent/screen"
	"github.com/assent-run/assent/screen/field"
	"github.com/assent-run/assent/screen/render"
)

// URI is the view's address as an MCP resource.
const URI = "ui://assent/screen-view.html"

// MIMEType is the MCP Apps profile of HTML.
const MIMEType = "text/html;profile=mcp-app"

var (
	//go:embed engine.js
	engineJS string
	//go:embed view.js
	viewJS string
	//go:embed view.css
	viewCSS string
)

// Config is what a view knows of the app that serves it.
type Config struct {
	// Tools are the names of the tools screens' buttons may call.
	Tools []string `json:"tools"`
	// Pictures maps the app's picture names to data: URIs.
	Pictures map[string]string `json:"pictures,omitempty"`
	// Version is the serving runtime's version.
	Version string `json:"version,omitempty"`
	// Secret maps a tool's name to its secret params: a value a field
	// gives to one of them is never told to the model.
	Secret map[string][]string `json:"secret,omitempty"`
	// CSS is the screen theme, as the web UI draws screens.
	CSS string `json:"-"`
}

// Page returns the view's HTML document for cfg.
func Page(cfg Config) []byte {
	conf, _ := json.Marshal(cfg) // escapes <, > and & so the JSON can't close its element
	var b bytes.Buffer
	t := Tables()
	b.Grow(len(t) + len(engineJS) + len(viewJS) + len(cfg.CSS) + 4096)
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
	b.WriteString(noClose(hostThemes(cfg.CSS), "</style"))
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
<p id="confirm-link" hidden><label for="confirm-link-text">This app can't open links here. Copy this address into your browser:</label> <input id="confirm-link-text" type="text" readonly></p>
<div class="actions"><button type="button" id="confirm-cancel">Cancel</button> <button type="button" id="confirm-open" class="primary">Open assent</button></div>
</dialog>
</main>
<script type="application/json" id="view-config">`)
	b.Write(conf)
	b.WriteString(`</script>
<script type="application/json" id="view-tables">`)
	b.Write(t)
	b.WriteString("</script>\n<script>\n")
	b.WriteString(noClose(engineJS, "</script"))
	b.WriteString("\n</script>\n<script>\n")
	b.WriteString(noClose(viewJS, "</script"))
	b.WriteString("\n</script>\n</body>\n</html>\n")
	return b.Bytes()
}

// Tables returns the JSON the engine reads its tables from: the screen
// package's catalog, limits, reserved words and issue severities
// (screen.Tables), the field messages in English and the renderer's words.
var Tables = sync.OnceValue(func() []byte {
	var t map[string]any
	if err := json.Unmarshal(screen.Tables(), &t); err != nil {
		panic(err) // screen.Tables writes an object
	}
	t["messages"] = field.English()
	t["words"] = map[string]string{
		"loading":       render.WordLoading,
		"missing":       render.WordMissing,
		"unsupported":   render.WordUnsupported,
		"blocked":       render.WordBlocked,
		"newer":         render.WordNewerVersion,
		"hidden":        render.WordHidden,
		"fieldFallback": field.English().Text(&field.Problem{}), // a key no message has
	}
	b, err := json.Marshal(t) // escapes <, > and &, so the JSON can't close its element
	if err != nil {
		panic(err)
	}
	return b
})

// hostThemes returns rules that let the host's theme choose the screen
// theme's light or dark tokens, whatever the system's preference: the
// theme's first :root block (light) and the :root block inside its
// prefers-color-scheme: dark query, each under html[data-theme=…], which
// the view sets from the host's context.
func hostThemes(css string) string {
	block := func(s string) string {
		i := strings.Index(s, ":root")
		if i < 0 {
			return ""
		}
		open := strings.IndexByte(s[i:], '{')
		if open < 0 {
			return ""
		}
		end := strings.IndexByte(s[i+open:], '}')
		if end < 0 {
			return ""
		}
		return s[i+open+1 : i+open+end]
	}
	var b strings.Builder
	if light := block(css); light != "" {
		b.WriteString(`html[data-theme="light"] {` + light + "}\n")
	}
	if i := strings.Index(css, "prefers-color-scheme: dark"); i >= 0 {
		if dark := block(css[i:]); dark != "" {
			b.WriteString(`html[data-theme="dark"] {` + dark + "}\n")
		}
	}
	return b.String()
}

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
