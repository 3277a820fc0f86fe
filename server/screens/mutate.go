package screens

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/wire"
)

// handleMutate serves POST /api/mutate (SPEC 10.14): a client runs a
// screen tool with {"tool", "params"} and the caller's credentials. The
// server checks everything again before running anything, honours
// Idempotency-Key for 24 hours per principal, and never logs params.
//
// A tool with a confirmation is refused here with 409
// confirmation_required: its sentence is shown, and confirmed, only by the
// web UI's press of a screen's button, so calling this endpoint directly
// can never skip a person's confirmation.
func (s *Part) handleMutate(w http.ResponseWriter, r *http.Request) {
	p, ok := s.mutateCaller(w, r)
	if !ok {
		return
	}
	name, params, aerr := decodeMutate(w, r)
	if aerr != nil {
		host.WriteAPIError(w, aerr)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if _, present := r.Header["Idempotency-Key"]; present && !validIdemKey(key) {
		host.WriteError(w, wire.InvalidRequest, "Idempotency-Key must be 1 to 200 letters, digits or _-:.")
		return
	}
	if _, ok := s.screenTools.Lookup(name); !ok {
		host.WriteError(w, wire.UnknownTool, "no tool of that name is registered (names are compared byte for byte)")
		return
	}
	if e := s.checkAccess(p, name); e != nil {
		host.WriteAPIError(w, e)
		return
	}
	var entry *idemEntry
	if key != "" {
		scope := p.ID
		if scope == "" {
			scope = "anon:" + host.ClientIP(r)
		}
		fp := host.Fingerprint(name, params)
		var (
			state idemState
			ierr  *wire.Error
		)
		entry, state, ierr = s.idemBegin(r.Context(), scope, key, fp)
		if ierr != nil {
			host.WriteAPIError(w, ierr)
			return
		}
		switch state {
		case idemReplay:
			w.Header().Set("Idempotent-Replayed", "true")
			writeRaw(w, entry.status, entry.body)
			return
		case idemConflict:
			host.WriteError(w, wire.IdempotencyConflict, "this Idempotency-Key was used for other params; use a new key for a new press")
			return
		case idemInProgress:
			host.WriteAPIError(w, wire.New(wire.IdempotencyInProgress, "a request with this Idempotency-Key is still running; retry shortly"))
			return
		}
	}
	status, body := s.mutate(r, p, name, params)
	if entry != nil {
		// Answers a retry may change (a failure worth retrying) are not
		// kept; every other answer is replayed for the key's lifetime.
		s.idemFinish(r.Context(), entry, status, body, status < 500)
	}
	s.Log.Info("mutate", "tool", name, "principal", p.ID, "status", status)
	writeRaw(w, status, body)
}

// mutate runs the tool and returns the response's status and body.
func (s *Part) mutate(r *http.Request, p store.Principal, name string, params map[string]any) (int, []byte) {
	res, aerr := s.runTool(r.Context(), p, name, params)
	if aerr != nil {
		return aerr.Status, mustMarshal(map[string]any{"error": errorBody(aerr)})
	}
	result := res.Value
	if result == nil {
		result = map[string]any{}
	}
	return http.StatusOK, mustMarshal(struct {
		OK     bool           `json:"ok"`
		Tool   string         `json:"tool"`
		Result map[string]any `json:"result"`
		Update string         `json:"update,omitempty"`
	}{true, name, result, res.Update})
}

// errorBody is the error object of SPEC 10.2: the one wire shape, with
// its data also spread at the top level, where SPEC 10.14 reads
// invalid_params' issues.
func errorBody(e *wire.Error) map[string]any {
	out := map[string]any{"code": e.Code, "message": e.Message, "retryable": e.Retryable}
	if len(e.Data) > 0 {
		out["data"] = e.Data
	}
	for k, v := range e.Data {
		if _, taken := out[k]; !taken {
			out[k] = v
		}
	}
	return out
}

func mustMarshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(`{"error":{"code":"tool_failed","message":"the result could not be written","retryable":true}}`)
	}
	return buf.Bytes()
}

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(body)
}

// mutateCaller authenticates a mutate request when it carries credentials.
// A request without any is anonymous (the zero principal), admitted only by
// public tools. A cookie request must come from the web UI's own origin.
func (s *Part) mutateCaller(w http.ResponseWriter, r *http.Request) (store.Principal, bool) {
	ctx := r.Context()
	if tok, ok := host.Bearer(r); ok {
		p, err := s.PrincipalByBearer(ctx, tok)
		if err != nil {
			s.Unauthorized(w, err)
			return p, false
		}
		return p, s.Allow(w, p)
	}
	if c, err := r.Cookie(host.SessionCookie); err == nil && c.Value != "" {
		if !s.SameOrigin(r) {
			host.WriteError(w, wire.BadOrigin, "a browser request must come from the assent web UI itself (the Origin header is missing or another site's)")
			return store.Principal{}, false
		}
		sess, err := s.Store.Session(ctx, auth.Hash(c.Value), s.Now())
		if err != nil {
			s.Unauthorized(w, err)
			return store.Principal{}, false
		}
		if e := s.CheckWebChange(r, sess); e != nil {
			host.WriteAPIError(w, e)
			return store.Principal{}, false
		}
		p, err := s.Store.Principal(ctx, sess.PrincipalID)
		if err != nil || p.Revoked {
			s.Unauthorized(w, store.ErrNotFound)
			return store.Principal{}, false
		}
		return p, s.Allow(w, p)
	}
	return store.Principal{}, s.Allow(w, store.Principal{ID: "anon:" + host.ClientIP(r)})
}

// decodeMutate reads {"tool": "…", "params": {…}} (and an optional
// "button"). Any other key, such as "confirmed" or "source", is refused:
// the transport decides those, never the body.
func decodeMutate(w http.ResponseWriter, r *http.Request) (string, map[string]any, *wire.Error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, host.MaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return "", nil, wire.New(wire.TooLarge, "the request body is over 1 MiB")
		}
		return "", nil, wire.New(wire.InvalidRequest, "the request body could not be read")
	}
	bad := func(msg string) (string, map[string]any, *wire.Error) {
		return "", nil, wire.New(wire.InvalidRequest, msg)
	}
	var body map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&body); err != nil || body == nil || !atEnd(dec) {
		return bad(`the body must be one JSON object {"tool": "…", "params": {…}}`)
	}
	for k := range body {
		if k != "tool" && k != "params" && k != "button" {
			return bad("unexpected key \"" + k + "\"; send only tool, params and button")
		}
	}
	var name string
	if err := json.Unmarshal(body["tool"], &name); err != nil || name == "" {
		return bad(`"tool" must be a non-empty string naming a registered tool`)
	}
	var params map[string]any
	if raw, ok := body["params"]; !ok || json.Unmarshal(raw, &params) != nil || params == nil {
		return bad(`"params" must be a JSON object`)
	}
	if raw, ok := body["button"]; ok {
		var button string
		if json.Unmarshal(raw, &button) != nil {
			return bad(`"button" must be a string`)
		}
	}
	return name, params, nil
}

// validIdemKey reports whether k is 1 to 200 of [A-Za-z0-9_\-:.].
func validIdemKey(k string) bool {
	if len(k) < 1 || len(k) > 200 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == ':' || c == '.') {
			return false
		}
	}
	return true
}

// idemCache remembers the answers to requests with an Idempotency-Key, in
// memory, for ttl, holding at most max keys (the oldest are forgotten
// first).
type idemCache struct {
	mu    sync.Mutex
	max   int
	ttl   time.Duration
	byKey map[string]*idemEntry
	fifo  []*idemEntry
}

type idemEntry struct {
	key     string
	fp      [32]byte
	created time.Time
	done    bool
	status  int
	body    []byte
}

type idemState int

const (
	idemNew idemState = iota
	idemReplay
	idemConflict
	idemInProgress
)

func newIdemCache(max int, ttl time.Duration) *idemCache {
	return &idemCache{max: max, ttl: ttl, byKey: map[string]*idemEntry{}}
}

// begin looks key up. For a new key it records an entry in progress, which
// the caller settles with finish.
func (c *idemCache) begin(key string, fp [32]byte, now time.Time) (*idemEntry, idemState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire(now)
	if e, ok := c.byKey[key]; ok {
		switch {
		case e.fp != fp:
			return e, idemConflict
		case !e.done:
			return e, idemInProgress
		}
		return e, idemReplay
	}
	e := &idemEntry{key: key, fp: fp, created: now}
	c.byKey[key] = e
	c.fifo = append(c.fifo, e)
	for len(c.byKey) > c.max && len(c.fifo) > 0 {
		c.drop(c.fifo[0])
		c.fifo = c.fifo[1:]
	}
	return e, idemNew
}

// finish settles e with its answer, or forgets it when keep is false so a
// retry runs again.
func (c *idemCache) finish(e *idemEntry, status int, body []byte, keep bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !keep {
		c.drop(e)
		return
	}
	e.done, e.status, e.body = true, status, body
}

// drop forgets e if it is still the entry for its key; c.mu is held.
func (c *idemCache) drop(e *idemEntry) {
	if c.byKey[e.key] == e {
		delete(c.byKey, e.key)
	}
}

// expire forgets entries older than the ttl; c.mu is held. Entries are
// created in time order, so the expired ones are a prefix of fifo.
func (c *idemCache) expire(now time.Time) {
	i := 0
	for i < len(c.fifo) && now.Sub(c.fifo[i].created) >= c.ttl {
		c.drop(c.fifo[i])
		i++
	}
	// Entries dropped early (not kept) stay in fifo until they expire;
	// skip them too so fifo does not grow without bound.
	for i < len(c.fifo) && c.byKey[c.fifo[i].key] != c.fifo[i] {
		i++
	}
	if i > 0 {
		c.fifo = slices.Clone(c.fifo[i:])
	}
	if len(c.fifo) > 2*c.max {
		c.fifo = slices.DeleteFunc(c.fifo, func(e *idemEntry) bool { return c.byKey[e.key] != e })
	}
}

// atEnd reports whether nothing but white space follows the value dec
// decoded. (Decoder.More stops at a closing bracket, which is trailing
// data too.)
func atEnd(dec *json.Decoder) bool {
	_, err := dec.Token()
	return err == io.EOF
}
