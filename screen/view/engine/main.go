//go:build js && wasm

// Command engine is the screen view's parser and renderer, compiled to
// WebAssembly and embedded in the view (see package view). It reads a
// stream with the same screen package the server reads it with, checks
// fields with the same rules and messages, and draws with the same
// template, so a screen in an agent's host looks and behaves as it does in
// the web UI.
//
// It sets one global, omniScreen, with:
//
//	open(config) -> session  config: {"tools", "pictures", "assets", "components", "families"}
//	session.write(text)       write stream text (complete lines)
//	session.end()             end the stream
//	session.reset()           start a new parser
//	session.draw() -> JSON    {"html", "ended", "rejected", "title"}
//	session.doc() -> JSON     the document in the conformance shape
//	session.input(id, value, touched) -> message
//	session.press(id) -> JSON {"tool", "params"} or {"blocked": fieldID}
//	session.update(text) -> JSON {"applied", "issues"}
package main

import (
	"encoding/json"
	"html/template"
	"strings"
	"syscall/js"

	"github.com/assent-run/assent/screen"
	"github.com/assent-run/assent/screen/field"
	"github.com/assent-run/assent/screen/render"
)

type config struct {
	Tools []string `json:"tools"`
	// Pictures maps the app's picture names to data: URIs.
	Pictures map[string]string `json:"pictures"`
	// Assets, Components and Families declare the rest of the app to the
	// parser, in the forms screen.DeclareComponents and
	// screen.DeclarePictures read.
	Assets     []string        `json:"assets"`
	Components json.RawMessage `json:"components"`
	Families   json.RawMessage `json:"families"`
}

type session struct {
	cfg     config
	opt     screen.Options
	p       *screen.Parser
	doc     *screen.Document
	touched map[string]bool
	msgs    field.Messages
}

func newSession(cfg config) *session {
	s := &session{cfg: cfg, msgs: field.Messages{}}
	s.opt = screen.Options{Tools: cfg.Tools, Assets: cfg.Assets}
	for name := range cfg.Pictures {
		s.opt.Assets = append(s.opt.Assets, name)
	}
	if len(cfg.Components) > 0 && string(cfg.Components) != "null" {
		s.opt.Components, _ = screen.DeclareComponents(cfg.Components)
	}
	if len(cfg.Families) > 0 && string(cfg.Families) != "null" {
		s.opt.Pictures, _ = screen.DeclarePictures(cfg.Families)
	}
	s.reset()
	return s
}

func (s *session) reset() {
	s.p = screen.NewParser(s.opt)
	s.doc = s.p.Document()
	s.touched = map[string]bool{}
}

func (s *session) problem(n *screen.Node) *field.Problem {
	v, _ := s.doc.State(s.doc.Edits(n.ID))
	if n.App {
		if n.Props["required"] == true {
			return field.CheckAppField(n.Props, v)
		}
		return nil
	}
	return field.Check(n.Type, n.Props, v)
}

func (s *session) draw() string {
	tools := map[string]bool{}
	for _, t := range s.cfg.Tools {
		tools[t] = true
	}
	v := render.Build(s.doc, render.Options{
		Tool: func(name string) bool { return tools[name] },
		Picture: func(name string) template.URL {
			if src := s.cfg.Pictures[name]; strings.HasPrefix(src, "data:image/") {
				return template.URL(src)
			}
			return ""
		},
		Message: func(n *screen.Node, key string) string {
			if !s.touched[n.ID] {
				return ""
			}
			return s.msgs.Text(s.problem(n))
		},
	})
	var b strings.Builder
	if err := render.WriteHTML(&b, v.Root); err != nil {
		b.Reset()
	}
	out, _ := json.Marshal(map[string]any{"html": b.String(), "ended": v.Ended, "rejected": v.Rejected, "title": v.Title, "newer": v.Newer})
	return string(out)
}

func (s *session) input(id string, value any, touched bool) string {
	n := s.doc.Node(id)
	if n == nil || !field.IsField(n.Type) && !n.App {
		return ""
	}
	if err := s.doc.SetState(s.doc.Edits(id), value); err != nil {
		return ""
	}
	if touched {
		s.touched[id] = true
	}
	if !s.touched[id] {
		return ""
	}
	return s.msgs.Text(s.problem(n))
}

// press returns the tool and params a Button runs, or the first field
// its params read that has a problem.
func (s *session) press(id string) string {
	n := s.doc.Node(id)
	m := s.doc.Mutation(id)
	if n == nil || n.Type != "Button" || m == nil {
		return `{"refused":true}`
	}
	for _, fn := range s.doc.FieldsReadBy(m) {
		if s.problem(fn) != nil {
			s.touched[fn.ID] = true
			b, _ := json.Marshal(map[string]any{"blocked": fn.ID})
			return string(b)
		}
	}
	params := make(map[string]any, len(m.Params))
	for k, v := range m.Params {
		if ref, ok := v.(screen.StateRef); ok {
			v, _ = s.doc.State(string(ref))
		}
		params[k] = v
	}
	b, _ := json.Marshal(map[string]any{"tool": m.Tool, "params": params})
	return string(b)
}

func (s *session) update(text string) string {
	res, err := s.p.Update(text)
	if err != nil {
		b, _ := json.Marshal(map[string]any{"applied": false, "issues": []any{}, "error": err.Error()})
		return string(b)
	}
	s.doc = s.p.Document()
	b, _ := json.Marshal(map[string]any{"applied": res.Applied, "issues": res.Issues})
	return string(b)
}

func (s *session) object() js.Value {
	o := js.Global().Get("Object").New()
	fn := func(f func(args []js.Value) any) js.Func {
		return js.FuncOf(func(this js.Value, args []js.Value) any { return f(args) })
	}
	arg := func(args []js.Value, i int) js.Value {
		if i < len(args) {
			return args[i]
		}
		return js.Undefined()
	}
	o.Set("write", fn(func(a []js.Value) any {
		s.p.WriteString(arg(a, 0).String())
		s.doc = s.p.Document()
		return nil
	}))
	o.Set("end", fn(func(a []js.Value) any { s.doc = s.p.End(); return nil }))
	o.Set("reset", fn(func(a []js.Value) any { s.reset(); return nil }))
	o.Set("draw", fn(func(a []js.Value) any { return s.draw() }))
	o.Set("doc", fn(func(a []js.Value) any {
		b, _ := json.Marshal(s.doc)
		return string(b)
	}))
	o.Set("issues", fn(func(a []js.Value) any {
		b, _ := json.Marshal(s.doc.Issues())
		return string(b)
	}))
	o.Set("input", fn(func(a []js.Value) any {
		var v any
		if err := json.Unmarshal([]byte(arg(a, 1).String()), &v); err != nil {
			return ""
		}
		return s.input(arg(a, 0).String(), v, arg(a, 2).Truthy())
	}))
	o.Set("press", fn(func(a []js.Value) any { return s.press(arg(a, 0).String()) }))
	o.Set("update", fn(func(a []js.Value) any { return s.update(arg(a, 0).String()) }))
	return o
}

func main() {
	api := js.Global().Get("Object").New()
	api.Set("version", screen.FormatVersion)
	api.Set("open", js.FuncOf(func(this js.Value, args []js.Value) any {
		var cfg config
		if len(args) > 0 {
			json.Unmarshal([]byte(args[0].String()), &cfg)
		}
		return newSession(cfg).object()
	}))
	js.Global().Set("omniScreen", api)
	if ready := js.Global().Get("omniScreenReady"); ready.Type() == js.TypeFunction {
		ready.Invoke()
	}
	select {}
}
