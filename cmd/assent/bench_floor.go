package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/assent-run/assent/server"
	"github.com/assent-run/assent/store"
)

// floorTool is the trivial tool of the floor's MCP server, and
// floorCommitTool the one that commits one transaction before it answers.
const (
	floorTool       = "floor_echo"
	floorCommitTool = "floor_commit"
)

// floorQueue is each floor subscriber's buffer, the same as the event
// stream's per-subscriber queue in assent.
const floorQueue = 256

// floorServer is what assent is measured against: the least a server on
// the same libraries does for the same request.
//
//   - /mcp: an MCP server on the same SDK with a trivial tool, served
//     the way assent serves the client's protocol revision (statelessly
//     from server.StatelessRevision on, with sessions before);
//   - /http: a net/http JSON endpoint that decodes the body and answers
//     a small object, the floor for assent's JSON routes;
//   - floorCommitTool on /mcp and POST /http/commit: the same, after
//     committing one transaction on the store the floor was given (one
//     audit record appended), the floor of a call that must be durable
//     before it answers: same store, same journal mode and sync setting;
//   - /events: a net/http SSE broadcaster with assent's wire format and
//     per-subscriber buffer.
type floorServer struct {
	base  string
	bcast *floorBroadcaster
	srv   *http.Server
	done  chan error
}

// startFloor starts the floor on loopback; with a store st, its durable
// tool and endpoint commit on st.
func startFloor(st store.Store) (*floorServer, error) {
	ms := mcp.NewServer(&mcp.Implementation{Name: "floor", Version: "1"}, nil)
	// The SDK writes to a result as it sends it: a new one for each call.
	answer := func() *mcp.CallToolResult {
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: `{"ok":true}`}},
			StructuredContent: map[string]any{"ok": true},
		}
	}
	anyArgs := json.RawMessage(`{"type":"object","additionalProperties":true}`)
	ms.AddTool(&mcp.Tool{Name: floorTool, Description: "Answer at once.", InputSchema: anyArgs},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return answer(), nil
		})
	if st != nil {
		ms.AddTool(&mcp.Tool{Name: floorCommitTool, Description: "Commit one transaction, then answer.", InputSchema: anyArgs},
			func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				if err := floorCommit(ctx, st); err != nil {
					return nil, err
				}
				return answer(), nil
			})
	}
	get := func(*http.Request) *mcp.Server { return ms }
	stateful := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{SessionTimeout: 30 * time.Minute})
	stateless := mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{Stateless: true})

	f := &floorServer{bcast: &floorBroadcaster{subs: map[chan floorEvent]struct{}{}}, done: make(chan error, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= server.StatelessRevision {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	})
	jsonHandler := func(commit bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var body map[string]any
			if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&body); err != nil {
				http.Error(w, `{"error":{"code":"invalid_request"}}`, http.StatusBadRequest)
				return
			}
			if commit {
				if err := floorCommit(r.Context(), st); err != nil {
					http.Error(w, `{"error":{"code":"store_unavailable"}}`, http.StatusServiceUnavailable)
					return
				}
			}
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": map[string]any{}})
		}
	}
	mux.HandleFunc("POST /http", jsonHandler(false))
	if st != nil {
		mux.HandleFunc("POST /http/commit", jsonHandler(true))
	}
	mux.HandleFunc("GET /events", f.bcast.serve)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f.base = "http://" + ln.Addr().String()
	f.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { f.done <- f.srv.Serve(ln) }()
	return f, nil
}

// floorCommit commits one transaction on st: one audit record, the
// smallest write every durable call of assent makes.
func floorCommit(ctx context.Context, st store.Store) error {
	_, err := st.Audit().AppendAudit(ctx, store.AuditRecord{Time: time.Now().UTC(), PrincipalID: "bench-floor",
		Source: "bench", Action: "bench.floor", OK: true})
	return err
}

func (f *floorServer) close() {
	f.bcast.closeAll()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if f.srv.Shutdown(ctx) != nil {
		f.srv.Close()
	}
	<-f.done
}

type floorEvent struct {
	seq  int64
	typ  string
	data []byte
}

// floorBroadcaster fans events out to SSE subscribers, each with a buffer
// of floorQueue events; a subscriber whose buffer is full misses the event.
type floorBroadcaster struct {
	mu     sync.Mutex
	seq    int64
	subs   map[chan floorEvent]struct{}
	closed bool
}

func (b *floorBroadcaster) publish(typ string, data []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	e := floorEvent{seq: b.seq, typ: typ, data: data}
	for ch := range b.subs {
		select {
		case ch <- e:
		default:
		}
	}
}

func (b *floorBroadcaster) closeAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for ch := range b.subs {
		close(ch)
	}
	clear(b.subs)
}

func (b *floorBroadcaster) serve(w http.ResponseWriter, r *http.Request) {
	ch := make(chan floorEvent, floorQueue)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.subs[ch] = struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.subs, ch)
		b.mu.Unlock()
	}()
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": ok\n\n")
	if rc.Flush() != nil {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case e, ok := <-ch:
			if !ok {
				return
			}
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.seq, e.typ, e.data); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		}
	}
}
