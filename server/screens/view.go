package screens

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	assent "github.com/assent-run/assent"
	"github.com/assent-run/assent/screen/confirm"
	"github.com/assent-run/assent/screen/view"
	"github.com/assent-run/assent/server/host"
	"github.com/assent-run/assent/server/wire"
	"github.com/assent-run/assent/tool"
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
	cfg := view.Config{Version: assent.Version, Tools: s.screenTools.Names(), Pictures: map[string]string{}}
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
func (s *Part) fileViewPress(ctx context.Context, c tool.Call, name string, params map[string]any) *tool.Result {
	screenID, _ := c.Meta[metaScreen].(string)
	button, _ := c.Meta[metaButton].(string)
	sc, ok := s.screenFor(c.Principal, screenID)
	if !ok || button == "" {
		return nil
	}
	sc.mu.Lock()
	m := sc.doc.Mutation(button)
	closed := sc.closed
	var display map[string]string
	if m != nil {
		display = shownParams(sc.doc, m.Params, params)
	}
	sc.mu.Unlock()
	if m == nil || m.Tool != name || closed {
		return nil
	}
	pend, err := s.screenTools.Prepare(confirm.WithDisplay(ctx, display), name, params, nil)
	if err != nil || !pend.NeedsConfirmation() {
		if err == nil {
			pend.Cancel()
		}
		return nil
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
	url := strings.TrimRight(s.Config.BaseURL, "/") + "/screens/" + sc.id + "?press=" + id
	return &tool.Result{IsError: true, Text: "confirmation_required: a person confirms this in assent: " + url, Structured: map[string]any{
		"code":      wire.ConfirmationRequired,
		"message":   "a person confirms this in assent, where the app says what it will do; open the url",
		"retryable": false,
		"sentence":  pend.Sentence(),
		"url":       url,
	}}
}

// viewRefusal is a refusal as SPEC 10.28 shapes it: an error result whose
// structuredContent is {"code", "message"}.
func viewRefusal(e *wire.Error) *tool.Result {
	body := map[string]any{"code": e.Code, "message": e.Message, "retryable": e.Retryable}
	if is, ok := e.Data["issues"]; ok {
		body["issues"] = is
	}
	return &tool.Result{IsError: true, Text: e.Error(), Structured: body}
}

// showScreenMeta links show_screen to the view (SPEC 10.25).
var showScreenMeta = map[string]any{"ui": map[string]any{"resourceUri": view.URI}}
