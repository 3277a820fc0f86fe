package sse

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The transport runner: each case is an HTTP response (status, headers,
// body) and what a client must make of it: the text written to the parser,
// whether the parser was ended, and the outcome, of which only the fields
// given are compared. Every case runs with the body in one read and in reads
// of 1, 5 and 13 bytes. Our own cases are in testdata/sse.json; the shared
// suite's transport cases run too when they are present.

const sharedTransport = "../../../shared/omni-ir/conformance/transport/sse.json"

type transportCase struct {
	ID          string   `json:"id"`
	Rules       []string `json:"rules"`
	Description string   `json:"description"`
	Response    struct {
		Status  int               `json:"status"`
		Headers map[string]string `json:"headers"`
		Body    json.RawMessage   `json:"body"`
	} `json:"response"`
	Expect struct {
		Written string                     `json:"written"`
		Ended   bool                       `json:"ended"`
		Outcome map[string]json.RawMessage `json:"outcome"`
	} `json:"expect"`
}

// body joins a case's body: a string, or a list of strings and
// {"repeat": s, "times": n} parts.
func (c *transportCase) body() ([]byte, error) {
	var s string
	if json.Unmarshal(c.Response.Body, &s) == nil {
		return []byte(s), nil
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(c.Response.Body, &parts); err != nil {
		return nil, fmt.Errorf("body is neither a string nor a list: %v", err)
	}
	var b bytes.Buffer
	for _, p := range parts {
		if json.Unmarshal(p, &s) == nil {
			b.WriteString(s)
			continue
		}
		var rep struct {
			Repeat string `json:"repeat"`
			Times  int    `json:"times"`
		}
		if err := json.Unmarshal(p, &rep); err != nil {
			return nil, fmt.Errorf("body part %s: %v", p, err)
		}
		b.WriteString(strings.Repeat(rep.Repeat, rep.Times))
	}
	return b.Bytes(), nil
}

func loadTransportCases(t *testing.T, path string) []transportCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var file struct {
		Cases []transportCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &file); err != nil || file.Cases == nil {
		// The cases may also be a bare list.
		if err2 := json.Unmarshal(data, &file.Cases); err2 != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	return file.Cases
}

func TestTransportCases(t *testing.T) {
	own := loadTransportCases(t, filepath.Join("testdata", "sse.json"))
	if len(own) == 0 {
		t.Fatal("no cases in testdata/sse.json")
	}
	runTransportCases(t, own)
}

func TestSharedTransportCases(t *testing.T) {
	if _, err := os.Stat(sharedTransport); err != nil {
		t.Skipf("shared transport cases absent: %v", err)
	}
	runTransportCases(t, loadTransportCases(t, sharedTransport))
}

func runTransportCases(t *testing.T, cases []transportCase) {
	seen := map[string]bool{}
	for _, tc := range cases {
		if seen[tc.ID] {
			t.Errorf("duplicate case id %q", tc.ID)
		}
		seen[tc.ID] = true
		body, err := tc.body()
		if err != nil {
			t.Fatalf("%s: %v", tc.ID, err)
		}
		for _, n := range readSizes {
			t.Run(fmt.Sprintf("%s/read=%d", tc.ID, n), func(t *testing.T) {
				resp := &http.Response{
					StatusCode: tc.Response.Status,
					Status:     fmt.Sprintf("%d %s", tc.Response.Status, http.StatusText(tc.Response.Status)),
					Header:     http.Header{},
					Body:       io.NopCloser(&pieceReader{data: body, n: n}),
				}
				for k, v := range tc.Response.Headers {
					resp.Header.Set(k, v)
				}
				if tc.Response.Status == http.StatusOK {
					resp.Header.Set("Content-Type", "text/event-stream")
				}
				rec := newRecorder()
				o := new(Client).ReadResponse(context.Background(), resp, rec)
				if got := rec.written.String(); got != tc.Expect.Written {
					t.Errorf("written %q, want %q", got, tc.Expect.Written)
				}
				if ended := rec.ends > 0; ended != tc.Expect.Ended || rec.ends > 1 {
					t.Errorf("parser ended %d times, want ended=%v", rec.ends, tc.Expect.Ended)
				}
				checkOutcome(t, o, tc.Expect.Outcome)
			})
		}
	}
}

// checkOutcome compares the fields want gives with the outcome's JSON.
func checkOutcome(t *testing.T, o Outcome, want map[string]json.RawMessage) {
	t.Helper()
	data, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	for k, raw := range want {
		var w any
		if err := json.Unmarshal(raw, &w); err != nil {
			t.Fatalf("outcome.%s: %v", k, err)
		}
		if g, ok := got[k]; !ok || !jsonEqual(g, w) {
			t.Errorf("outcome.%s = %v (present %v), want %v; outcome %s", k, g, ok, w, data)
		}
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
