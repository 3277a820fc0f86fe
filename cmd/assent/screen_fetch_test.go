package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// runScreenFetch runs "assent screen fetch" with args through execute, the
// binary's entry point, and returns its exit code and output.
func runScreenFetch(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errw bytes.Buffer
	code = execute(append([]string{"screen", "fetch"}, args...), strings.NewReader(stdin), &out, &errw)
	return code, out.String(), errw.String()
}

// fetchRequest is what the canned server saw.
type fetchRequest struct {
	Method, Query, Auth, Accept, ContentType string
	Prompt                                   string
}

// fetchServer answers every request with status and body, and records
// the last request.
func fetchServer(t *testing.T, status int, header http.Header, body string) (*httptest.Server, *fetchRequest) {
	t.Helper()
	seen := &fetchRequest{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b struct {
			Prompt string `json:"prompt"`
		}
		_ = json.NewDecoder(r.Body).Decode(&b)
		*seen = fetchRequest{r.Method, r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("Accept"), r.Header.Get("Content-Type"), b.Prompt}
		for k, v := range header {
			w.Header()[k] = v
		}
		if status == http.StatusOK {
			w.Header().Set("Content-Type", "text/event-stream")
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, seen
}

const (
	fetchScreen = "root = Card([title])\ntitle = Heading(\"Pay\")\n"
	fetchBody   = "event: chunk\ndata: {\"text\":\"root = Card([title])\\n\"}\n\n" +
		": ping\n\n" +
		"event: chunk\ndata: {\"text\":\"title = Heading(\\\"Pay\\\")\\n\"}\n\n" +
		"event: done\ndata: {\"stopReason\":\"end_turn\",\"model\":\"mock\",\"ms\":12}\n\n"
)

func TestScreenFetchJSON(t *testing.T) {
	tests := []struct {
		name   string
		status int
		header http.Header
		body   string
		code   int
		want   string // the JSON printed, compacted
	}{
		{"done", 200, nil, fetchBody, 0,
			`{"written":"root = Card([title])\ntitle = Heading(\"Pay\")\n","ended":true,"outcome":{"model":"mock","ms":12,"status":"done","stopReason":"end_turn"}}`},
		{"error event", 200, nil, "event: chunk\ndata: {\"text\":\"a = Divider()\\n\"}\n\nevent: error\ndata: {\"code\":\"timeout\",\"message\":\"Too slow.\",\"retryable\":true}\n\n", 1,
			`{"written":"a = Divider()\n","ended":true,"outcome":{"code":"timeout","message":"Too slow.","retryable":true,"status":"error"}}`},
		{"error missing fields", 200, nil, "event: error\ndata: {}\n\n", 1,
			`{"written":"","ended":true,"outcome":{"code":"server_error","retryable":false,"status":"error"}}`},
		{"no terminal event", 200, nil, "event: chunk\ndata: {\"text\":\"a\"}\n\n", 1,
			`{"written":"a","ended":true,"outcome":{"code":"connection_lost","message":"the response ended before a done or error event","retryable":true,"status":"error"}}`},
		{"unsupported version", 400, nil, `{"error":{"code":"unsupported_version","message":"This server writes format 0.8.","retryable":false}}`, 1,
			`{"written":"","ended":false,"outcome":{"code":"unsupported_version","message":"This server writes format 0.8.","retryable":false,"status":"error"}}`},
		{"rate limited", 429, http.Header{"Retry-After": {"30"}}, `{"error":{"code":"rate_limited","message":"Slow down.","retryable":true}}`, 1,
			`{"written":"","ended":false,"outcome":{"code":"rate_limited","message":"Slow down.","retryAfter":30,"retryable":true,"status":"error"}}`},
		{"not the error form", 502, nil, "<html>Bad gateway</html>", 1,
			`{"written":"","ended":false,"outcome":{"code":"server_error","message":"the server answered 502 Bad Gateway without an error object","retryable":true,"status":"error"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := fetchServer(t, tt.status, tt.header, tt.body)
			code, out, errOut := runScreenFetch(t, "", "--json", srv.URL+"/api/generate")
			var compact bytes.Buffer
			if err := json.Compact(&compact, []byte(out)); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, out)
			}
			if code != tt.code || compact.String() != tt.want || errOut != "" {
				t.Errorf("exit %d, stdout %s, stderr %q\nwant exit %d, stdout %s", code, compact.String(), errOut, tt.code, tt.want)
			}
		})
	}
}

func TestScreenFetchRequest(t *testing.T) {
	tests := []struct {
		name  string
		stdin string
		env   string
		args  []string
		want  fetchRequest
	}{
		{"defaults", "", "", nil,
			fetchRequest{"POST", "", "", "text/event-stream", "application/json", ""}},
		{"version, prompt and token", "", "", []string{"--version", "0.8", "--prompt", "A payment screen", "--token-file", writeTokenFile(t, "t0k")},
			fetchRequest{"POST", "version=0.8", "Bearer t0k", "text/event-stream", "application/json", "A payment screen"}},
		{"prompt from stdin, token from env", "Sign up\n", "envtok", []string{"--prompt", "-"},
			fetchRequest{"POST", "", "Bearer envtok", "text/event-stream", "application/json", "Sign up"}},
		{"token file wins", "", "envtok", []string{"--token-file", writeTokenFile(t, "filetok")},
			fetchRequest{"POST", "", "Bearer filetok", "text/event-stream", "application/json", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("ASSENT_TOKEN", tt.env)
			srv, seen := fetchServer(t, 200, nil, fetchBody)
			code, _, errOut := runScreenFetch(t, tt.stdin, append(tt.args, "--json", srv.URL)...)
			if code != 0 || *seen != tt.want {
				t.Errorf("exit %d, stderr %q, request %+v; want %+v", code, errOut, *seen, tt.want)
			}
		})
	}
}

func TestScreenFetchText(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		code   int
		out    string // exact stdout
		err    string // exact stderr
	}{
		{"done", 200, fetchBody, 0, fetchScreen, "assent: done (end_turn, model mock, 12 ms)\n"},
		{"done without fields", 200, "event: chunk\ndata: {\"text\":\"a = Divider()\"}\n\nevent: done\ndata: {}\n\n", 0,
			"a = Divider()\n", "assent: done\n"},
		{"error", 200, "event: error\ndata: {\"code\":\"daily_cap\",\"message\":\"Come back tomorrow.\",\"retryable\":false}\n\n", 1,
			"", "assent: daily_cap: Come back tomorrow.\n"},
		{"retryable", 503, `{"error":{"code":"model_unverified","message":"Checking the model.","retryable":true}}`, 1,
			"", "assent: model_unverified: Checking the model. (retryable)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := fetchServer(t, tt.status, nil, tt.body)
			code, out, errOut := runScreenFetch(t, "", srv.URL)
			if code != tt.code || out != tt.out || errOut != tt.err {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr %q", code, out, errOut, tt.code, tt.out, tt.err)
			}
		})
	}
}

func TestScreenFetchUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"no URL", nil, 2, "accepts 1 arg"},
		{"two URLs", []string{"http://a", "http://b"}, 2, "accepts 1 arg"},
		{"bad version", []string{"--version", "v1", "http://127.0.0.1:1/api/generate"}, 2, "--version"},
		{"not http", []string{"ftp://example.com/generate"}, 2, "not an http or https URL"},
		{"unknown flag", []string{"--nope", "http://a"}, 2, "unknown flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runScreenFetch(t, "", tt.args...)
			if code != tt.code || out != "" || !strings.Contains(errOut, tt.err) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, stderr containing %q", code, out, errOut, tt.code, tt.err)
			}
		})
	}
}

func TestScreenFetchNoServer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	code, out, _ := runScreenFetch(t, "", "--json", url)
	var got struct {
		Written string         `json:"written"`
		Ended   bool           `json:"ended"`
		Outcome map[string]any `json:"outcome"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if code != 1 || got.Ended || got.Outcome["code"] != "connection_lost" || got.Outcome["retryable"] != true {
		t.Errorf("exit %d, output %s", code, out)
	}
}

func TestScreenFetchHelp(t *testing.T) {
	code, out, _ := runScreenFetch(t, "", "--help")
	if code != 0 || !strings.Contains(out, "Examples:") || !strings.Contains(out, "--version") {
		t.Errorf("exit %d, help %q", code, out)
	}
}
