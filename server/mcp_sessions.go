package server

import (
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpSessionHeader names an MCP session on the streamable transport.
const mcpSessionHeader = "Mcp-Session-Id"

// mcpSessions caps the live MCP sessions of each principal. A session is
// idle while none of its requests (including its notification stream) is
// in progress. Opening a session beyond the cap closes the principal's
// least recently used idle session; when every one is busy the new session
// is refused. Each session is also held in the server's liveSet, so
// revoking its principal closes it.
type mcpSessions struct {
	server *mcp.Server
	limit  int // ≤ 0: no cap
	hold   func(principalID string, end func()) (release func())
	now    func() time.Time

	mu      sync.Mutex
	byOwner map[string]map[string]*mcpSession
	pending map[string]int // sessions being opened, per principal
}

type mcpSession struct {
	session  *mcp.ServerSession
	lastUsed time.Time
	inFlight int
	release  func()
}

func newMCPSessions(srv *mcp.Server, limit int, hold func(string, func()) func(), now func() time.Time) *mcpSessions {
	return &mcpSessions{server: srv, limit: limit, hold: hold, now: now,
		byOwner: map[string]map[string]*mcpSession{}, pending: map[string]int{}}
}

// reserve makes room for one more session of principal, closing its least
// recently used idle session if it is at the cap. It reports false when
// every session is busy.
func (t *mcpSessions) reserve(principal string) bool {
	var evict []*mcpSession
	defer func() {
		for _, e := range evict {
			e.release()
			e.session.Close()
		}
	}()
	t.mu.Lock()
	defer t.mu.Unlock()
	own := t.byOwner[principal]
	for t.limit > 0 && len(own)+t.pending[principal] >= t.limit {
		var oldestID string
		var oldest *mcpSession
		for id, e := range own {
			if e.inFlight == 0 && (oldest == nil || e.lastUsed.Before(oldest.lastUsed)) {
				oldestID, oldest = id, e
			}
		}
		if oldest == nil {
			return false
		}
		delete(own, oldestID)
		evict = append(evict, oldest)
	}
	t.pending[principal]++
	return true
}

func (t *mcpSessions) unreserve(principal string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pending[principal]--; t.pending[principal] <= 0 {
		delete(t.pending, principal)
	}
}

// add records the session id that principal has just opened.
func (t *mcpSessions) add(principal, id string) {
	var ss *mcp.ServerSession
	for s := range t.server.Sessions() {
		if s.ID() == id {
			ss = s
			break
		}
	}
	if ss == nil {
		return // already gone
	}
	e := &mcpSession{session: ss, lastUsed: t.now()}
	e.release = t.hold(principal, func() { ss.Close() })
	t.mu.Lock()
	own := t.byOwner[principal]
	if own == nil {
		own = map[string]*mcpSession{}
		t.byOwner[principal] = own
	}
	own[id] = e
	t.mu.Unlock()
	go func() {
		_ = ss.Wait()
		t.forget(principal, id, e)
	}()
}

// forget drops a session that has ended.
func (t *mcpSessions) forget(principal, id string, e *mcpSession) {
	e.release()
	t.mu.Lock()
	defer t.mu.Unlock()
	if own := t.byOwner[principal]; own != nil && own[id] == e {
		delete(own, id)
		if len(own) == 0 {
			delete(t.byOwner, principal)
		}
	}
}

// use marks session id of principal busy until done is called.
func (t *mcpSessions) use(principal, id string) (done func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byOwner[principal][id]
	if e == nil {
		return func() {}
	}
	e.inFlight++
	e.lastUsed = t.now()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		e.inFlight--
		e.lastUsed = t.now()
	}
}

// count reports principal's live sessions.
func (t *mcpSessions) count(principal string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byOwner[principal])
}
