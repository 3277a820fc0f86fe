package sse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

const payLine = "root = Text(\"Hi\")\n"

func chunkEvent(text string) string {
	data, _ := json.Marshal(map[string]string{"text": text})
	return "event: chunk\ndata: " + string(data) + "\n\n"
}

const doneEvent = "event: done\ndata: {\"stopReason\":\"end_turn\",\"model\":\"mock\",\"ms\":1234}\n\n"

// readBody runs ReadResponse on a 200 whose body arrives in reads of n bytes.
func readBody(t *testing.T, c *Client, body string, n int) (Outcome, *recorder) {
	t.Helper()
	resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(&pieceReader{data: []byte(body), n: n})}
	rec := newRecorder()
	return c.ReadResponse(context.Background(), resp, rec), rec
}

func TestOutcomeFields(t *testing.T) {
	tests := []struct {
		name string
		body string
		want Outcome // compared without Fields
	}{
		{"done", chunkEvent(payLine) + doneEvent,
			Outcome{Status: StatusDone, StopReason: "end_turn", Model: "mock", Elapsed: 1234 * time.Millisecond}},
		{"done wrong types", "event: done\ndata: {\"stopReason\":1,\"model\":null,\"ms\":\"12\"}\n\n",
			Outcome{Status: StatusDone}},
		{"done negative ms", "event: done\ndata: {\"ms\":-5}\n\n", Outcome{Status: StatusDone}},
		{"error", "event: error\ndata: {\"code\":\"daily_cap\",\"message\":\"Come back tomorrow.\",\"retryable\":false}\n\n",
			Outcome{Status: StatusError, Code: "daily_cap", Message: "Come back tomorrow."}},
		{"error empty code", "event: error\ndata: {\"code\":\"\",\"message\":\"m\",\"retryable\":true}\n\n",
			Outcome{Status: StatusError, Code: CodeServerError, Message: "m"}},
		{"live", "event: live\ndata: {\"screen\":\"s1\"}\n\n" + doneEvent,
			Outcome{Status: StatusDone, StopReason: "end_turn", Model: "mock", Elapsed: 1234 * time.Millisecond, Live: "s1"}},
		{"live not a string", "event: live\ndata: {\"screen\":7}\n\n" + doneEvent,
			Outcome{Status: StatusDone, StopReason: "end_turn", Model: "mock", Elapsed: 1234 * time.Millisecond}},
		{"live after terminal", doneEvent + "event: live\ndata: {\"screen\":\"s1\"}\n\n",
			Outcome{Status: StatusDone, StopReason: "end_turn", Model: "mock", Elapsed: 1234 * time.Millisecond}},
	}
	for _, tt := range tests {
		for _, n := range readSizes {
			t.Run(fmt.Sprintf("%s/read=%d", tt.name, n), func(t *testing.T) {
				o, rec := readBody(t, new(Client), tt.body, n)
				o.Fields = nil
				if !reflect.DeepEqual(o, tt.want) {
					t.Errorf("outcome %+v, want %+v", o, tt.want)
				}
				if rec.ends != 1 {
					t.Errorf("parser ended %d times, want 1", rec.ends)
				}
			})
		}
	}
}

func TestOutcomeJSON(t *testing.T) {
	tests := []struct {
		name string
		o    Outcome
		want string
	}{
		{"done keeps the fields received", Outcome{Status: StatusDone, Fields: map[string]json.RawMessage{"ms": json.RawMessage("12"), "extra": json.RawMessage(`"<b>"`)}},
			`{"extra":"<b>","ms":12,"status":"done"}`},
		{"error values replace received ones", Outcome{Status: StatusError, Code: CodeServerError, Fields: map[string]json.RawMessage{"code": json.RawMessage("7"), "message": json.RawMessage("1")}},
			`{"code":"server_error","retryable":false,"status":"error"}`},
		{"retry after", Outcome{Status: StatusError, Code: "rate_limited", Message: "Wait & see", Retryable: true, RetryAfter: 1500 * time.Millisecond},
			`{"code":"rate_limited","message":"Wait & see","retryAfter":2,"retryable":true,"status":"error"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf strings.Builder
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(tt.o); err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSuffix(buf.String(), "\n"); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// TestInvalidUTF8Text shows that bytes that aren't UTF-8 inside a chunk's
// text are replaced the same way however the body is split.
func TestInvalidUTF8Text(t *testing.T) {
	body := "event: chunk\ndata: {\"text\":\"a\xe2\x82b\xff\"}\n\n" + doneEvent
	for _, n := range readSizes {
		o, rec := readBody(t, new(Client), body, n)
		if got, want := rec.written.String(), "a\ufffdb\ufffd"; got != want || !o.Done() {
			t.Errorf("read=%d: written %q, outcome %+v; want %q, done", n, got, o, want)
		}
	}
}

func TestEventTooLarge(t *testing.T) {
	body := chunkEvent(payLine) + chunkEvent(strings.Repeat("x", 100)) + doneEvent
	for _, n := range readSizes {
		o, rec := readBody(t, &Client{MaxEventSize: 64}, body, n)
		if o.Code != CodeEventTooLarge || o.Retryable || rec.written.String() != payLine || rec.ends != 1 {
			t.Errorf("read=%d: outcome %+v, written %q, ends %d", n, o, rec.written.String(), rec.ends)
		}
	}
}

func TestWriteFailed(t *testing.T) {
	resp := &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(chunkEvent(payLine) + doneEvent))}
	rec := newRecorder()
	rec.writeErr = errors.New("disk full")
	o := new(Client).ReadResponse(context.Background(), resp, rec)
	if o.Code != CodeWriteFailed || o.Retryable || !strings.Contains(o.Message, "disk full") || rec.ends != 1 {
		t.Errorf("outcome %+v, ends %d", o, rec.ends)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 10, 10, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		h    string
		want time.Duration
	}{
		{"", 0},
		{"30", 30 * time.Second},
		{"0", 0},
		{"-3", 0},
		{"soon", 0},
		{"999999999", 24 * time.Hour},
		{"Sat, 10 Oct 2026 12:01:30 GMT", 90 * time.Second},
		{"Sat, 10 Oct 2026 11:00:00 GMT", 0},
	}
	for _, tt := range tests {
		if got := retryAfter(tt.h, now); got != tt.want {
			t.Errorf("retryAfter(%q) = %v, want %v", tt.h, got, tt.want)
		}
	}
}

// generateServer records the request it got and answers with handler.
func generateServer(t *testing.T, handler http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv
}

func TestGenerateRequest(t *testing.T) {
	type seen struct {
		method, path, query, contentType, accept, auth string
		body                                           map[string]any
	}
	tests := []struct {
		name    string
		path    string
		version string
		want    seen
	}{
		{"no version", "/api/generate", "", seen{query: ""}},
		{"version", "/api/generate", "0.8", seen{query: "version=0.8"}},
		{"query kept", "/api/generate?app=demo", "0.5", seen{query: "app=demo&version=0.5"}},
		{"version replaced", "/api/generate?version=9.9", "0.8", seen{query: "version=0.8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got seen
			srv := generateServer(t, func(w http.ResponseWriter, r *http.Request) {
				got = seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), r.Header.Get("Accept"), r.Header.Get("Authorization"), nil}
				_ = json.NewDecoder(r.Body).Decode(&got.body)
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, chunkEvent(payLine)+doneEvent)
			})
			rec := newRecorder()
			req := Request{URL: srv.URL + tt.path, Prompt: "A <payment> screen", Version: tt.version, Header: http.Header{"Authorization": {"Bearer t0k"}, "Accept": {"text/html"}}}
			o, err := new(Client).Generate(context.Background(), req, rec)
			if err != nil || !o.Done() || rec.written.String() != payLine {
				t.Fatalf("outcome %+v, err %v, written %q", o, err, rec.written.String())
			}
			want := seen{http.MethodPost, "/api/generate", tt.want.query, "application/json", "text/event-stream", "Bearer t0k", map[string]any{"prompt": "A <payment> screen"}}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("request %+v, want %+v", got, want)
			}
		})
	}
}

func TestGenerateInvalidRequest(t *testing.T) {
	tests := []struct{ name, url, version string }{
		{"no scheme", "example.com/api/generate", ""},
		{"ftp", "ftp://example.com/api/generate", ""},
		{"no host", "http:///api/generate", ""},
		{"malformed URL", "http://[::1", ""},
		{"version", "http://127.0.0.1:1/api/generate", "v0.8"},
		{"version three numbers", "http://127.0.0.1:1/api/generate", "0.8.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder()
			_, err := new(Client).Generate(context.Background(), Request{URL: tt.url, Version: tt.version}, rec)
			if !errors.Is(err, ErrInvalidRequest) || rec.ends != 0 {
				t.Errorf("err %v, ends %d; want ErrInvalidRequest, not ended", err, rec.ends)
			}
		})
	}
}

func TestGenerateNoServer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	rec := newRecorder()
	o, err := new(Client).Generate(context.Background(), Request{URL: url}, rec)
	if err != nil || o.Code != CodeConnectionLost || !o.Retryable || rec.ends != 0 || rec.written.Len() != 0 {
		t.Errorf("outcome %+v, err %v, ends %d", o, err, rec.ends)
	}
}

func TestRetryWithoutVersion(t *testing.T) {
	for _, retry := range []bool{false, true} {
		t.Run(fmt.Sprint(retry), func(t *testing.T) {
			var queries []string
			srv := generateServer(t, func(w http.ResponseWriter, r *http.Request) {
				queries = append(queries, r.URL.RawQuery)
				if r.URL.Query().Has("version") {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadRequest)
					io.WriteString(w, `{"error":{"code":"unsupported_version","message":"This server writes 0.7.","retryable":false}}`)
					return
				}
				io.WriteString(w, chunkEvent("# omni-ir 0.7\n"+payLine)+doneEvent)
			})
			rec := newRecorder()
			o, err := (&Client{RetryWithoutVersion: retry}).Generate(context.Background(), Request{URL: srv.URL, Version: "0.8"}, rec)
			if err != nil {
				t.Fatal(err)
			}
			if retry {
				if !o.Done() || len(queries) != 2 || queries[1] != "" || rec.written.String() != "# omni-ir 0.7\n"+payLine || rec.ends != 1 {
					t.Errorf("outcome %+v, queries %q, written %q, ends %d", o, queries, rec.written.String(), rec.ends)
				}
				return
			}
			if o.Code != CodeUnsupportedVersion || o.HTTPStatus != 400 || len(queries) != 1 || rec.ends != 0 {
				t.Errorf("outcome %+v, queries %q, ends %d", o, queries, rec.ends)
			}
		})
	}
}

// hangingServer sends body, flushes, then holds the response open until
// the test ends.
func hangingServer(t *testing.T, body string) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, body)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() {
		close(release)
		srv.Close()
	})
	return srv
}

// TestTerminalEndsRead shows that the client stops at the terminal event
// even when the server keeps the response open.
func TestTerminalEndsRead(t *testing.T) {
	srv := hangingServer(t, chunkEvent(payLine)+doneEvent)
	rec := newRecorder()
	o, err := (&Client{IdleTimeout: -1}).Generate(context.Background(), Request{URL: srv.URL}, rec)
	if err != nil || !o.Done() || rec.written.String() != payLine || rec.ends != 1 {
		t.Errorf("outcome %+v, err %v, written %q, ends %d", o, err, rec.written.String(), rec.ends)
	}
}

func TestIdleTimeout(t *testing.T) {
	srv := hangingServer(t, chunkEvent(payLine)+": ping\n\n")
	rec := newRecorder()
	o, err := (&Client{IdleTimeout: 500 * time.Millisecond}).Generate(context.Background(), Request{URL: srv.URL}, rec)
	if err != nil || o.Code != CodeConnectionLost || !o.Retryable || rec.written.String() != payLine || rec.ends != 1 {
		t.Errorf("outcome %+v, err %v, written %q, ends %d", o, err, rec.written.String(), rec.ends)
	}
}

// cancelSink cancels the request's context when the first text arrives.
type cancelSink struct {
	*recorder
	cancel context.CancelFunc
}

func (s cancelSink) Write(b []byte) (int, error) {
	s.cancel()
	return s.recorder.Write(b)
}

func TestCancel(t *testing.T) {
	srv := hangingServer(t, chunkEvent(payLine))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := newRecorder()
	o, err := (&Client{IdleTimeout: -1}).Generate(ctx, Request{URL: srv.URL}, cancelSink{rec, cancel})
	if err != nil || o.Code != CodeCancelled || o.Retryable || rec.written.String() != payLine || rec.ends != 1 {
		t.Errorf("outcome %+v, err %v, written %q, ends %d", o, err, rec.written.String(), rec.ends)
	}
}

func TestCancelBeforeAnswer(t *testing.T) {
	srv := generateServer(t, func(w http.ResponseWriter, r *http.Request) {})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := newRecorder()
	o, err := new(Client).Generate(ctx, Request{URL: srv.URL}, rec)
	if err != nil || o.Code != CodeCancelled || rec.ends != 0 {
		t.Errorf("outcome %+v, err %v, ends %d", o, err, rec.ends)
	}
}
