package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent"
	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
	"github.com/assent-run/assent/wire"
)

// StatelessRevision is the first MCP protocol revision served without
// sessions. Older revisions get sessions that end after Config.SessionTimeout
// of inactivity.
const StatelessRevision = "2026-07-28"

// mcpEndpoint serves /mcp over streamable HTTP.
type mcpEndpoint struct {
	streams   context.Context
	server    *mcp.Server
	stop      func()
	stateful  http.Handler
	stateless http.Handler
	sessions  *mcpSessions
	closeOnce sync.Once
}

func newMCPEndpoint(s *Server) *mcpEndpoint {
	srv, stop := NewMCPServer(s.host.Tools, s.host.Log, principalFromTokenInfo)
	s.screens.AddView(srv)
	verify := func(ctx context.Context, _ string, r *http.Request) (*mcpauth.TokenInfo, error) {
		// The bearer token was already checked by bearerOnly; hand the
		// principal on to the tool handlers.
		p, ok := auth.PrincipalFrom(r.Context())
		if !ok {
			return nil, mcpauth.ErrInvalidToken
		}
		return &mcpauth.TokenInfo{UserID: p.ID, Expiration: s.host.Now().Add(24 * 365 * 3600e9), Extra: map[string]any{"principal": p, "base": s.host.BaseURLOf(r)}}, nil
	}
	requireToken := mcpauth.RequireBearerToken(verify, nil)
	getServer := func(*http.Request) *mcp.Server { return srv }
	return &mcpEndpoint{
		streams:  s.host.Streams,
		server:   srv,
		stop:     stop,
		sessions: newMCPSessions(srv, s.host.Config.MaxSessions, s.host.Hold, s.host.Now),
		stateful: requireToken(mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
			SessionTimeout:      s.host.Config.SessionTimeout,
			MaxRequestBodyBytes: 4 << 20,
		})),
		stateless: requireToken(mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
			Stateless:           true,
			MaxRequestBodyBytes: 4 << 20,
		})),
	}
}

func (m *mcpEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	jw := &jsonErrors{ResponseWriter: w}
	defer jw.finish()
	m.serve(jw, r)
}

func (m *mcpEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		// A standalone notification stream lives as long as the session;
		// end it when the server shuts down so draining is not held up.
		ctx, cancel := context.WithCancel(r.Context())
		stop := context.AfterFunc(m.streams, cancel)
		defer stop()
		defer cancel()
		r = r.WithContext(ctx)
	}
	if v := r.Header.Get("Mcp-Protocol-Version"); v >= StatelessRevision {
		m.stateless.ServeHTTP(w, r)
		return
	}
	p, _ := auth.PrincipalFrom(r.Context())
	if id := r.Header.Get(mcpSessionHeader); id != "" {
		done := m.sessions.use(p.ID, id)
		defer done()
		m.stateful.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodPost {
		m.stateful.ServeHTTP(w, r)
		return
	}
	// A POST without a session opens one.
	if !m.sessions.reserve(p.ID) {
		host.WriteError(w, wire.TooManySessions,
			fmt.Sprintf("this token already holds %d MCP sessions, all of them busy; end one (DELETE /mcp with its Mcp-Session-Id) or wait for one to finish", m.sessions.limit))
		return
	}
	defer m.sessions.unreserve(p.ID)
	m.stateful.ServeHTTP(w, r)
	if id := w.Header().Get(mcpSessionHeader); id != "" {
		m.sessions.add(p.ID, id)
	}
}

// close ends every MCP session.
func (m *mcpEndpoint) close() {
	m.closeOnce.Do(func() {
		m.stop()
		var sessions []*mcp.ServerSession
		for ss := range m.server.Sessions() {
			sessions = append(sessions, ss)
		}
		for _, ss := range sessions {
			ss.Close()
		}
	})
}

func principalFromTokenInfo(_ context.Context, req *mcp.CallToolRequest) (store.Principal, bool) {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return store.Principal{}, false
	}
	p, ok := req.Extra.TokenInfo.Extra["principal"].(store.Principal)
	return p, ok
}

// PrincipalFunc tells an MCP server who is calling.
type PrincipalFunc func(context.Context, *mcp.CallToolRequest) (store.Principal, bool)

// NewMCPServer returns an MCP server whose tools mirror reg, kept in sync as
// tools are added and removed (clients are told the list changed). Hidden
// tools can be called but are not listed. who identifies the caller of each
// call; a call without a principal is refused. stop ends the mirroring.
func NewMCPServer(reg *tool.Registry, log interface {
	Error(msg string, args ...any)
}, who PrincipalFunc) (srv *mcp.Server, stop func()) {
	srv = mcp.NewServer(&mcp.Implementation{Name: "assent", Version: assent.Version}, &mcp.ServerOptions{
		Instructions: "assent: agents read and propose; people assent. Changes that need a person wait in their inbox.",
	})
	var mu sync.Mutex
	hidden := map[string]bool{}
	present := map[string]bool{}
	sync := func() {
		mu.Lock()
		defer mu.Unlock()
		now := map[string]bool{}
		for _, t := range reg.List() {
			now[t.Name] = true
			hidden[t.Name] = t.Hidden
			srv.AddTool(mcpTool(t), mcpHandler(reg, t.Name, who, log))
		}
		var gone []string
		for name := range present {
			if !now[name] {
				gone = append(gone, name)
				delete(hidden, name)
			}
		}
		if len(gone) > 0 {
			srv.RemoveTools(gone...)
		}
		present = now
	}
	sync()
	stop = reg.Watch(sync)
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			// A registered tool the caller may not see is, to the caller,
			// no tool: its call gets the answer for an unknown name.
			caller, _ := who(ctx, asCallRequest(req))
			if cr, ok := req.(*mcp.CallToolRequest); ok && cr.Params != nil {
				if _, exists := reg.Lookup(cr.Params.Name); exists && !reg.VisibleTo(caller, cr.Params.Name) {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", cr.Params.Name)}
				}
			}
			res, err := next(ctx, method, req)
			if method != "tools/list" || err != nil {
				return res, err
			}
			if lr, ok := res.(*mcp.ListToolsResult); ok {
				apps := DeclaresApps(req)
				mu.Lock()
				kept := lr.Tools[:0:0]
				for _, t := range lr.Tools {
					if !apps && AppOnly(t) {
						continue
					}
					if !hidden[t.Name] && reg.VisibleTo(caller, t.Name) {
						kept = append(kept, t)
					}
				}
				mu.Unlock()
				lr.Tools = kept
			}
			return res, err
		}
	})
	return srv, stop
}

// AppsExtension is the key under which an MCP client declares MCP Apps
// support in the extensions of its initialize capabilities.
const AppsExtension = "io.modelcontextprotocol/ui"

// DeclaresApps reports whether the client that sent req declared MCP Apps
// support when it initialized. A session without initialize parameters
// (the stateless protocol) declares nothing.
func DeclaresApps(req mcp.Request) bool {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil {
		return false
	}
	_, ok = ip.Capabilities.Extensions[AppsExtension]
	return ok
}

// AppOnly reports whether t is meant for an MCP App view only: its
// _meta.ui.visibility lists "app" and not "model". Such a tool is listed
// only to clients that declare MCP Apps support.
func AppOnly(t *mcp.Tool) bool {
	ui, ok := t.Meta["ui"].(map[string]any)
	if !ok {
		return false
	}
	var vis []string
	switch v := ui["visibility"].(type) {
	case []string:
		vis = v
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				vis = append(vis, s)
			}
		}
	}
	app, model := false, false
	for _, v := range vis {
		switch v {
		case "app":
			app = true
		case "model":
			model = true
		}
	}
	return app && !model
}

// asCallRequest carries req's session and transport details in the shape
// a PrincipalFunc reads.
func asCallRequest(req mcp.Request) *mcp.CallToolRequest {
	if cr, ok := req.(*mcp.CallToolRequest); ok {
		return cr
	}
	ss, _ := req.GetSession().(*mcp.ServerSession)
	return &mcp.CallToolRequest{Session: ss, Extra: req.GetExtra()}
}

func mcpTool(t tool.Tool) *mcp.Tool {
	schema := t.InputSchema
	if schema == nil {
		schema = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)
	}
	out := t.OutputSchema
	if out == nil {
		out = json.RawMessage(`{"type":"object","additionalProperties":true}`)
	}
	destructive, openWorld := t.Annotations.Destructive, t.Annotations.OpenWorld
	mt := &mcp.Tool{
		Name:         t.Name,
		Title:        t.Title,
		Description:  t.Description,
		InputSchema:  schema,
		OutputSchema: out,
		Annotations: &mcp.ToolAnnotations{
			Title:           t.Title,
			ReadOnlyHint:    t.Annotations.ReadOnly,
			DestructiveHint: &destructive,
			IdempotentHint:  t.Annotations.Idempotent,
			OpenWorldHint:   &openWorld,
		},
	}
	if len(t.Meta) > 0 {
		mt.Meta = t.Meta
	}
	return mt
}

func mcpHandler(reg *tool.Registry, name string, who PrincipalFunc, log interface {
	Error(msg string, args ...any)
}) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		p, ok := who(ctx, req)
		if !ok {
			return toolErrorResult(tool.Errorf("sign_in_required", "this call carries no principal")), nil
		}
		var args json.RawMessage
		var meta map[string]any
		if req.Params != nil {
			args, meta = req.Params.Arguments, req.Params.Meta
		}
		res, err := reg.Call(withProgress(auth.WithPrincipal(ctx, p), req), name, tool.Call{Principal: p, Args: args, Meta: meta})
		if err != nil {
			var te *tool.Error
			if errors.As(err, &te) {
				return toolErrorResult(te), nil
			}
			if store.Unavailable(err) {
				log.Error("tool refused: the store is unavailable", "tool", name, "err", err)
				return toolErrorResult(host.StoreUnavailableError()), nil
			}
			log.Error("tool failed", "tool", name, "err", err)
			return toolErrorResult(tool.Errorf("tool_failed", "the tool failed inside the server; try again, and report it if it persists")), nil
		}
		out := toolResult(res)
		if res != nil && res.Decision != "" {
			if action := elicitDecision(ctx, req, res.Decision); action != "" {
				out.Meta = mcp.Meta{ElicitationMeta: action}
			}
		}
		return out, nil
	}
}

// ElicitTimeout bounds how long a tool call waits for the client to answer
// the URL elicitation that brings a decision to the person.
const ElicitTimeout = 2 * time.Minute

// ElicitationMeta is the key, in a tool result's _meta, of the client's
// answer to the URL elicitation sent for the decision the call filed:
// accept, decline or cancel (the person's answer to opening the page, not
// to the decision), or error when the client did not answer.
const ElicitationMeta = "io.assent/elicitation"

// DeclaresURLElicitation reports whether the client that sent req declared
// URL-mode elicitation (MCP 2025-11-25) when it initialized, on a protocol
// revision where the server may send it a request during a tool call
// (before StatelessRevision). A session without initialize parameters
// declares nothing.
func DeclaresURLElicitation(req mcp.Request) bool {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	return ip != nil && ip.ProtocolVersion < StatelessRevision && ip.Capabilities != nil && ip.Capabilities.Elicitation != nil && ip.Capabilities.Elicitation.URL != nil
}

// elicitDecision asks a client that declared URL-mode elicitation to open
// link, the page where a person decides what the call filed, and returns
// the client's answer; "" when the client cannot be asked. The page asks
// the person to sign in as usual: opening it grants nothing, and only the
// click on the card decides.
func elicitDecision(ctx context.Context, req *mcp.CallToolRequest, link string) string {
	if !DeclaresURLElicitation(req) {
		return ""
	}
	if strings.HasPrefix(link, "/") {
		base := ""
		if req.Extra != nil && req.Extra.TokenInfo != nil {
			base, _ = req.Extra.TokenInfo.Extra["base"].(string)
		}
		if base == "" {
			return ""
		}
		link = strings.TrimRight(base, "/") + link
	}
	if !strings.HasPrefix(link, "https://") && !strings.HasPrefix(link, "http://") {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, ElicitTimeout)
	defer cancel()
	res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
		Mode:          "url",
		Message:       "A person must decide what the agent just filed in assent. Open the page to see it and approve or decline.",
		URL:           link,
		ElicitationID: auth.NewID("eli_"),
	})
	if err != nil || res == nil {
		return "error"
	}
	return res.Action
}

func toolResult(res *tool.Result) *mcp.CallToolResult {
	if res == nil {
		res = &tool.Result{}
	}
	text := res.Text
	var structured any
	if res.Structured != nil {
		// Marshalled once, for the text and the structured content both.
		b, err := json.Marshal(res.Structured)
		if err != nil {
			structured = res.Structured // the SDK reports the failure
		} else {
			structured = json.RawMessage(b)
			if text == "" {
				text = string(b)
			}
		}
	}
	out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: res.IsError}
	if structured != nil {
		out.StructuredContent = structured
	}
	return out
}

// toolErrorResult is a tool's refusal as an MCP error result: the one
// wire shape, {"error": {code, message, retryable, data?}}, as the
// structured content and, as JSON, the text.
func toolErrorResult(te *tool.Error) *mcp.CallToolResult {
	body := wire.Body{Error: host.FromToolError(te)}
	b, _ := json.Marshal(body)
	// The SDK sends the structured content with its object keys sorted;
	// the text is written the same way, so the two stay equal when the
	// error carries data.
	var v any
	if json.Unmarshal(b, &v) == nil {
		if sorted, err := json.Marshal(v); err == nil {
			b = sorted
		}
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: json.RawMessage(b)}
}
