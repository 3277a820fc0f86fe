package screens

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	assent "github.com/assent-run/assent"
	"github.com/assent-run/assent/screen"
	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/screen/render"
	"github.com/assent-run/assent/screen/view"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/tool"
	"github.com/assent-run/assent/wire"
)

// Screens inside agents' hosts (SPEC 10.25–10.28): show_screen names the
// view, a ui:// resource that draws the tool's argument as it streams in,
// and each screen tool is offered to the view as an app-only MCP tool that
// is checked here like a press.

// The _meta keys a view's tools/call carries (SPEC 10.28, 10.35), and the
// screen assent keeps for the tool call that drew the view.
const (
	metaIdempotencyKey = "io.omni-ir/idempotency-key"
	metaButton         = "io.omni-ir/button"
	metaScreen         = "io.assent/screen"
)

// AddView offers the screen view on ms as an MCP resource.
func (s *Part) AddView(ms *mcp.Server) {
	ms.AddResource(&mcp.Resource{
		URI:         view.URI,
		Name:        "screen-view",
		Title:       "Screen",
		Description: "Draws a show_screen argument inside the host, as assent's web UI draws it.",
		MIMEType:    view.MIMEType,
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
			URI: view.URI, MIMEType: view.MIMEType, Text: string(s.viewPage()),
			Meta: mcp.Meta{"ui": map[string]any{"prefersBorder": true}},
		}}}, nil
	})
}

// viewPage returns the view with the app's tools and pictures as they are
// now.
func (s *Part) viewPage() []byte {
	cfg := view.Config{Version: assent.Version, Tools: s.screenTools.Names(), Pictures: map[string]string{}, Secret: map[string][]string{}}
	for _, name := range cfg.Tools {
		if t, ok := s.screenTools.Lookup(name); ok && len(t.Secret) > 0 {
			cfg.Secret[name] = slices.Clone(t.Secret)
		}
	}
	s.scrMu.Lock()
	for name, p := range s.pictures {
		cfg.Pictures[name] = "data:" + p.contentType + ";base64," + base64.StdEncoding.EncodeToString(p.data)
	}
	s.scrMu.Unlock()
	if css, err := fs.ReadFile(host.StaticFS, "static/screen.css"); err == nil {
		cfg.CSS = string(css)
	}
	return view.Page(cfg)
}

// viewTool offers a screen tool over MCP to screen views (SPEC 10.28): the
// model is not meant to call it, and every call is checked here, as a
// press through /api/mutate is: the tool's schema, the caller, and the
// idempotency key the view sends in _meta.
func (s *Part) viewTool(t confirm.Tool) tool.Tool {
	desc := t.Description
	if desc == "" {
		desc = "A screen action."
	}
	return tool.Tool{
		Name:         t.Name,
		Title:        t.Name,
		Description:  desc + " Called by a screen's governed button; checked on the server against the tool's schema.",
		InputSchema:  json.RawMessage(`{"type":"object"}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"update":{"type":"string","description":"Omni-IR lines that update the screen"}},"additionalProperties":true}`),
		Annotations:  tool.Annotations{ReadOnly: false, Destructive: true, Idempotent: false, OpenWorld: true},
		Meta:         map[string]any{"ui": map[string]any{"visibility": []string{"app"}}},
		Handler: func(ctx context.Context, c tool.Call) (*tool.Result, error) {
			var params map[string]any
			if err := json.Unmarshal(c.Args, &params); err != nil || params == nil {
				return viewRefusal(wire.New(wire.InvalidRequest, "the params must be a JSON object")), nil
			}
			key, present := c.Meta[metaIdempotencyKey]
			if !present {
				return s.runViewTool(ctx, c, t.Name, params), nil
			}
			k, _ := key.(string)
			if !validIdemKey(k) {
				return viewRefusal(wire.New(wire.InvalidRequest, "_meta[\""+metaIdempotencyKey+"\"] must be 1 to 200 letters, digits or _-:.")), nil
			}
			entry, state, ierr := s.idemBegin(ctx, "mcp:"+c.Principal.ID, k, host.Fingerprint(t.Name, params))
			if ierr != nil {
				return viewRefusal(ierr), nil
			}
			switch state {
			case idemReplay:
				var res tool.Result
				if err := json.Unmarshal(entry.body, &res); err == nil {
					return &res, nil
				}
			case idemConflict:
				return viewRefusal(wire.New(wire.IdempotencyConflict, "this idempotency key was used for other params; use a new key for a new press")), nil
			case idemInProgress:
				return viewRefusal(wire.New(wire.IdempotencyInProgress, "a call with this idempotency key is still running; retry shortly")), nil
			}
			res := s.runViewTool(ctx, c, t.Name, params)
			body, _ := json.Marshal(res)
			retry, _ := res.Structured.(map[string]any)["retryable"].(bool)
			s.idemFinish(ctx, entry, http.StatusOK, body, !retry)
			return res, nil
		},
	}
}

// runViewTool runs the tool and shapes its answer for the view.
func (s *Part) runViewTool(ctx context.Context, c tool.Call, name string, params map[string]any) *tool.Result {
	out, aerr := s.runTool(ctx, c.Principal, name, params)
	if aerr != nil && aerr.Code == wire.ConfirmationRequired {
		if res := s.fileViewPress(ctx, c, name, params); res != nil {
			return res
		}
	}
	if aerr != nil {
		aerr.Retryable = aerr.Retryable || aerr.Status >= 500
		return viewRefusal(aerr)
	}
	res := map[string]any{}
	for k, v := range out.Value {
		res[k] = v
	}
	if out.Update != "" {
		res["update"] = out.Update
	}
	if b, ok := c.Meta[metaButton].(string); ok && b != "" && len(b) <= 64 {
		// The button is trusted for nothing but naming where the update
		// goes (SPEC 10.35).
		res["button"] = b
	}
	b, _ := json.Marshal(res)
	return &tool.Result{Text: string(b), Structured: res}
}

// fileViewPress files a press from a view for a tool that asks for a
// person's confirmation. Nothing a view sends proves a person pressed, so
// the tool does not run: the press waits on the screen assent keeps for
// the view's tool call, and the refusal carries the app's sentence and the
// page where a person confirms it. It returns nil when the call names no
// screen of the caller's with that button and tool.
//
// The view runs inside the agent's client, so its arguments decide no
// value by themselves: the params are read from the screen as assent holds
// it (see viewPressLocked). A value the view sends for a field the page
// shows lands in that field first, where the person sees it; any other
// value must be the screen's own, or the call is refused
// press_params_mismatch.
func (s *Part) fileViewPress(ctx context.Context, c tool.Call, name string, args map[string]any) *tool.Result {
	screenID, _ := c.Meta[metaScreen].(string)
	button, _ := c.Meta[metaButton].(string)
	sc, ok := s.screenFor(ctx, c.Principal, screenID)
	if !ok || button == "" {
		return nil
	}
	sc.mu.Lock()
	m := pressableLocked(sc, button)
	var (
		vp      viewPress
		display map[string]string
	)
	if m != nil && m.Tool == name {
		vp = s.viewPressLocked(sc, m, args)
		display = s.shownParams(name, vp.params)
	}
	sc.mu.Unlock()
	if m == nil || m.Tool != name {
		return nil
	}
	if len(vp.mismatch) > 0 {
		return viewRefusal(paramsMismatch(vp.mismatch))
	}
	pend, err := s.screenTools.Prepare(confirm.WithDisplay(ctx, display), name, vp.params, vp.problems)
	if err != nil {
		return viewRefusal(pressError(err))
	}
	if !pend.NeedsConfirmation() {
		pend.Cancel()
		return nil
	}
	if len(vp.entries) > 0 || s.SharedBus {
		// The view's entries land in the screen's fields, where the person
		// sees them, and the press reads the screen as the store holds it:
		// if it moved since it was read above, nothing lands.
		var moved []string
		err = s.change(ctx, sc, func() error {
			m := pressableLocked(sc, button)
			if m == nil || m.Tool != name {
				return errNoChange
			}
			again := s.viewPressLocked(sc, m, args)
			if moved = again.mismatch; len(moved) == 0 && !sameJSON(again.params, vp.params) {
				moved = slices.Sorted(maps.Keys(vp.params))
			}
			if len(moved) > 0 {
				return errNoChange
			}
			for key, v := range again.entries {
				if err := sc.doc.SetState(key, v); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			pend.Cancel()
			switch {
			case len(moved) > 0:
				return viewRefusal(paramsMismatch(moved))
			case errors.Is(err, errNoChange) || isToolCode(err, "not_found"):
				return nil
			case isToolCode(err, codeVersionConflict):
				return viewRefusal(versionConflictError())
			}
			var te *tool.Error
			if errors.As(err, &te) {
				return viewRefusal(host.FromToolError(te))
			}
			return viewRefusal(wire.New(wire.InvalidRequest, err.Error()))
		}
		if len(vp.entries) > 0 {
			s.publishScreen(sc, map[string]any{"screen": sc.id})
		}
	}
	id, err := s.addPress(ctx, sc, button, pend)
	if err != nil {
		pend.Cancel()
		e := wire.New(wire.StoreUnavailable, err.Error())
		if te, ok := err.(*tool.Error); ok {
			e = host.FromToolError(te)
		}
		return viewRefusal(e)
	}
	s.noteViewPress(sc.id, id)
	url := strings.TrimRight(s.Config.BaseURL, "/") + "/screens/" + sc.id + "?press=" + id
	return &tool.Result{IsError: true, Text: "confirmation_required: a person confirms this in assent (in their inbox, or at " + url + ")", Structured: map[string]any{
		"code":      wire.ConfirmationRequired,
		"message":   "a person confirms this in assent, in their inbox or on the screen's page; wait for the outcome with inbox_wait {\"screen\": \"" + sc.id + "\"}",
		"retryable": false,
		"sentence":  pend.Sentence(),
		"url":       url,
		"screen":    sc.id,
		"press":     id,
	}}
}

// codePressParamsMismatch refuses a view's press whose params are not
// what the screen assent holds would send.
const codePressParamsMismatch wire.Code = "press_params_mismatch"

// paramsMismatch is the refusal of a view's press whose params named are
// not the screen's.
func paramsMismatch(names []string) *wire.Error {
	e := wire.New(codePressParamsMismatch, "these params do not match the screen as assent holds it: "+strings.Join(names, ", ")+
		"; a button's params come from the screen, so show the screen again, or press the button on its page in assent")
	e.Status = http.StatusConflict
	return e.WithData(map[string]any{"params": names})
}

// viewPress is a view's press as the screen assent holds it would send it.
type viewPress struct {
	// params are what the tool would get.
	params map[string]any
	// entries are the view's values for fields the page shows, by $key,
	// where they differ from the screen's: they land in the fields before
	// the press is filed.
	entries map[string]any
	// problems are the checks of the fields the params read.
	problems []confirm.FieldProblem
	// mismatch names, sorted, the params the view sent that the screen
	// can't take: a value it does not hold and no field of the page shows,
	// a param the button does not send, or one missing.
	mismatch []string
}

// viewPressLocked reads the press of the governed Button m from the view's
// args: each param is the screen's value, except a $key edited by a field
// the page draws (not a secret one, and not one the person has entered a
// value in on assent's page), which takes the view's value when the field
// can hold it, as if the person had typed it there. sc.mu is held.
func (s *Part) viewPressLocked(sc *liveScreen, m *screen.Mutation, args map[string]any) viewPress {
	secret := s.secretKeysLocked(sc)
	shown := shownFieldsLocked(sc, secret)
	vp := viewPress{params: make(map[string]any, len(m.Params))}
	for k := range args {
		if _, ok := m.Params[k]; !ok {
			vp.mismatch = append(vp.mismatch, k)
		}
	}
	for k, raw := range m.Params {
		v := raw
		ref, isRef := raw.(screen.StateRef)
		if isRef {
			v, _ = sc.doc.State(string(ref))
		}
		got, sent := args[k]
		switch {
		case isRef && secret[string(ref)]:
			// A secret is typed in assent: the view's value is never
			// used, nor compared, so a call learns nothing of it.
		case !sent:
			vp.mismatch = append(vp.mismatch, k)
		case sameJSON(got, v):
		case isRef && fieldsCanHold(shown[string(ref)], got) && !touchedLocked(sc, shown[string(ref)]):
			if vp.entries == nil {
				vp.entries = map[string]any{}
			}
			vp.entries[string(ref)] = got
			v = got
		default:
			vp.mismatch = append(vp.mismatch, k)
		}
		vp.params[k] = v
	}
	slices.Sort(vp.mismatch)
	for _, fn := range sc.doc.FieldsReadBy(m) {
		f := fieldInfo{id: fn.ID, typ: fn.Type, key: sc.doc.Edits(fn.ID), app: fn.App, props: fn.Props}
		v, entered := vp.entries[f.key]
		if !entered {
			v, _ = sc.doc.State(f.key)
		}
		vp.problems = append(vp.problems, confirm.FieldProblem{FieldID: fn.ID, Problem: f.problem(v)})
	}
	return vp
}

// shownFieldsLocked returns the fields the page draws, by the $key they
// edit, leaving out secret ones (drawn empty); sc.mu is held.
func shownFieldsLocked(sc *liveScreen, secret map[string]bool) map[string][]fieldInfo {
	drawn := map[string]bool{}
	for _, v := range render.Build(sc.doc, render.Options{Secret: secret}).Fields {
		drawn[v.ID] = true
	}
	out := map[string][]fieldInfo{}
	for _, f := range sc.fieldsLocked() {
		if drawn[f.id] && !secret[f.key] {
			out[f.key] = append(out[f.key], f)
		}
	}
	return out
}

// touchedLocked reports whether the person has entered a value in one of
// fields on assent's page: a value they entered is theirs, and a view's
// call does not replace it. sc.mu is held.
func touchedLocked(sc *liveScreen, fields []fieldInfo) bool {
	for _, f := range fields {
		if sc.touched[f.id] {
			return true
		}
	}
	return false
}

// fieldsCanHold reports whether v is a value every field of fields can
// hold; false for no fields.
func fieldsCanHold(fields []fieldInfo, v any) bool {
	for _, f := range fields {
		if checkFieldValue(f.typ, v) != nil {
			return false
		}
	}
	return len(fields) > 0
}

// pressableLocked returns the McpMutation of the governed Button id, or
// nil when id is no such button of an open screen; sc.mu is held.
func pressableLocked(sc *liveScreen, id string) *screen.Mutation {
	n := sc.doc.Node(id)
	m := sc.doc.Mutation(id)
	if n == nil || n.Type != "Button" || m == nil || sc.closed {
		return nil
	}
	if a, _ := n.Props["action"].(string); a == "" {
		return nil
	}
	return m
}

// sameJSON reports whether a and b have the same JSON form.
func sameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// viewRefusal is a refusal as SPEC 10.28 shapes it: an error result whose
// structuredContent is {"code", "message"}.
func viewRefusal(e *wire.Error) *tool.Result {
	body := map[string]any{"code": e.Code, "message": e.Message, "retryable": e.Retryable}
	for _, k := range []string{"issues", "params"} {
		if v, ok := e.Data[k]; ok {
			body[k] = v
		}
	}
	return &tool.Result{IsError: true, Text: e.Error(), Structured: body}
}

// showScreenMeta links show_screen to the view (SPEC 10.25).
var showScreenMeta = map[string]any{"ui": map[string]any{"resourceUri": view.URI}}
