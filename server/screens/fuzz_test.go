package screens

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/assent-run/assent/server/internal/host"
	"github.com/assent-run/assent/wire"
)

// fzTopKeys returns the keys of the top-level JSON object in b, in order,
// read with a token decoder independently of decodeMutate.
func fzTopKeys(b []byte) ([]string, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		k, ok := tok.(string)
		if !ok {
			return nil, false
		}
		keys = append(keys, k)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, false
		}
	}
	return keys, true
}

// fzStrings collects the string values (not the keys) anywhere in v.
func fzStrings(v any, out *[]string) {
	switch x := v.(type) {
	case string:
		*out = append(*out, x)
	case []any:
		for _, e := range x {
			fzStrings(e, out)
		}
	case map[string]any:
		for _, e := range x {
			fzStrings(e, out)
		}
	}
}

// FuzzDecodeMutate feeds arbitrary bodies of POST /api/mutate to
// decodeMutate and checks:
//   - an error comes with no tool name and no params, is invalid_request
//     or too_large, and carries the table's status;
//   - success means a non-empty tool name, a non-nil params object, and a
//     body that is exactly one JSON object whose top-level keys are only
//     tool, params and button (the transport decides "confirmed" and
//     "source", never the body), with "tool" a string;
//   - an error message never repeats a string value of the body (the
//     endpoint never logs or echoes params);
//   - the 1 MiB limit: leading whitespace up to the limit changes nothing,
//     one byte over it is too_large.
func FuzzDecodeMutate(f *testing.F) {
	for _, s := range []string{
		`{"tool":"pay.now","params":{"amount":5}}`,
		`{"tool":"info.public","params":{"amount":1}}`,
		`{"tool":"pay.now","params":{"amount":5},"button":"b1"}`,
		`{"tool":"pay.now","params":{"amount":5},"button":7}`,
		`nope`,
		`{"params":{}}`,
		`{"tool":"pay.now","params":[1]}`,
		`{"tool":"pay.now"}`,
		`{"tool":"pay.now","params":null}`,
		`{"tool":"","params":{}}`,
		`{"tool":"pay.now","params":{"amount":5},"confirmed":true}`,
		`{"tool":"pay.now","params":{"amount":5},"source":"user"}`,
		`{"tool":"pay.now","params":{"amount":5},"Confirmed":true}`,
		`{"tool":"pay.now","tool":"pay.later","params":{}}`,
		`{"\u0074ool":"pay.now","params":{}}`,
		`{"tool":"pay.now","params":{"n":123456789012345678901234567890,"f":1e308,"deep":{"a":[[[[{"b":null}]]]]}}}`,
		`{"tool":"pay.now","params":{"card":"4111111111111111","pin":"secret-pin-1234"}}`,
		`{"tool":"pay.now","params":{}} {"tool":"x","params":{}}`,
		`{"tool":"pay.now","params":{}} `,
		`{"tool":"a\u0000b","params":{"\xff":"\xfe"}}`,
		`{"tool":"pay.now","params":{"s":"` + strings.Repeat("x", 10000) + `"}}`,
		``,
		`null`,
		`{}`,
	} {
		f.Add([]byte(s), false)
	}
	f.Add([]byte(`{"tool":"pay.now","params":{}}`), true)
	f.Fuzz(func(t *testing.T, body []byte, big bool) {
		call := func(b []byte) (string, map[string]any, *wire.Error) {
			r := httptest.NewRequest(http.MethodPost, "/api/mutate", bytes.NewReader(b))
			return decodeMutate(httptest.NewRecorder(), r)
		}
		name, params, werr := call(body)
		if werr != nil {
			if name != "" || params != nil {
				t.Fatalf("error %v came with tool %q and params %v", werr, name, params)
			}
			if werr.Code != wire.InvalidRequest && werr.Code != wire.TooLarge {
				t.Fatalf("unexpected code %q", werr.Code)
			}
			if werr.Status != wire.Status(werr.Code) {
				t.Fatalf("status %d for %q", werr.Status, werr.Code)
			}
			if (werr.Code == wire.TooLarge) != (len(body) > host.MaxBody) {
				t.Fatalf("too_large for a body of %d bytes", len(body))
			}
			var v any
			if json.Unmarshal(body, &v) == nil {
				var strs []string
				fzStrings(v, &strs)
				for _, s := range strs {
					if len(s) >= 8 && strings.Contains(werr.Message, s) {
						if keys, _ := fzTopKeys(body); slices.Contains(keys, s) {
							continue // a top-level key is named, not a value
						}
						t.Fatalf("error message %q repeats the body's value %q", werr.Message, s)
					}
				}
			}
		} else {
			if name == "" || params == nil {
				t.Fatalf("success with tool %q and params %v", name, params)
			}
			if !json.Valid(body) {
				t.Fatalf("accepted %q, which is not one JSON value", body)
			}
			keys, ok := fzTopKeys(body)
			if !ok {
				t.Fatalf("accepted %q, which is not a JSON object", body)
			}
			for _, k := range keys {
				if k != "tool" && k != "params" && k != "button" {
					t.Fatalf("accepted the key %q in %q", k, body)
				}
			}
			var top struct {
				Tool   string         `json:"tool"`
				Params map[string]any `json:"params"`
			}
			if err := json.Unmarshal(fzFirst(body), &top); err != nil || top.Tool != name {
				t.Fatalf("tool %q, but the body says %q (%v)", name, top.Tool, err)
			}
		}
		if !big {
			return
		}
		// Leading whitespace up to the limit changes nothing; one byte
		// more is too_large.
		pad := host.MaxBody - len(body)
		if pad < 0 {
			return
		}
		padded := append(bytes.Repeat([]byte(" "), pad), body...)
		n2, p2, e2 := call(padded)
		if (e2 == nil) != (werr == nil) || n2 != name || (e2 != nil && e2.Code != werr.Code) || len(p2) != len(params) {
			t.Fatalf("padding to the limit changed the result: %q %v %v vs %q %v %v", name, params, werr, n2, p2, e2)
		}
		_, _, e3 := call(append([]byte(" "), padded...))
		if e3 == nil || e3.Code != wire.TooLarge {
			t.Fatalf("a body one byte over the limit gave %v", e3)
		}
	})
}

// FuzzParseToolsFile feeds arbitrary tools.json files to parseToolsFile and
// checks:
//   - an error comes with no tools, and never repeats a callback URL
//     (which may carry credentials in its user info);
//   - success means the file is exactly one JSON value (a second object
//     appended by mistake must not be silently ignored), one tool per
//     entry in order with its fields as written, a handler for each, a
//     confirmation exactly when "confirm" is non-empty, and a callback that
//     is an http or https URL with a host.
func FuzzParseToolsFile(f *testing.F) {
	for _, s := range []string{
		`{"tools":[{"name":"orders.cancel","description":"Cancel an order.","params":{"type":"object","properties":{"orderId":{"type":"string"}},"required":["orderId"],"additionalProperties":false},"callback":"http://127.0.0.1:1/cb"},
			{"name":"orders.refund","params":{"type":"object"},"confirm":"Refund {orderId}?","callback":"https://example.com/refund"}]}`,
		`{"tools":[{"name":"Orders.cancel","callback":"http://127.0.0.1:1/"}]}`,
		`{"tools":[{"name":"orders.cancel","callback":"file:///etc/passwd"}]}`,
		`{"tools":[{"name":"orders.cancel","callback":"http://127.0.0.1:1/","access":"everyone"}]}`,
		`{"tools":[{"name":"orders.cancel","callback":"http://127.0.0.1:1/","access":"public","secret":["pin"]}]}`,
		`{"tools":[{"name":"orders.cancel","callback":"http://127.0.0.1:1/","colour":"red"}]}`,
		`{"tools":[{"name":"orders.cancel","callback":"https://user:s3cr3t-t0ken@example.com/x"}]}`,
		`{"tools":[{"name":"orders.cancel","callback":"https://user:s3cr3t-t0ken@exa mple.com/x"}]}`,
		`{"tools":[{"name":"orders.cancel","callback":"http:///nohost"}]}`,
		`{"tools":[{"name":"orders.cancel","callback":"//example.com/x"}]}`,
		`{"tools":[{"name":"orders.cancel","callback":"http://[::1]:80/"}]}`,
		`{"tools":[{"name":"orders.cancel","callback":"http://127.0.0.1:1/"}]}` + "\n",
		`{"tools":[]}`,
		`{"tools":null}`,
		`{}`,
		`null`,
		``,
		`[]`,
		`{"tools":[{"name":"\u0000\xff","callback":"http://h/","params":123456789012345678901234567890}]}`,
		`{"tools":[{"name":"a.b","callback":"http://h/","params":{"a":[[[[[[]]]]]]}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tools, err := parseToolsFile(b, http.DefaultClient)
		var file struct {
			Tools []toolFileEntry `json:"tools"`
		}
		decErr := json.Unmarshal(fzFirst(b), &file)
		if err != nil {
			if tools != nil {
				t.Fatalf("error %v came with %d tools", err, len(tools))
			}
			if decErr == nil {
				for _, e := range file.Tools {
					if len(e.Callback) >= 8 && strings.Contains(err.Error(), e.Callback) {
						t.Fatalf("error %q repeats the callback URL", err)
					}
				}
			}
			return
		}
		if !json.Valid(b) {
			t.Fatalf("accepted %q, which is not one JSON value (what follows the first is ignored)", b)
		}
		if decErr != nil {
			t.Fatalf("accepted a file that json.Unmarshal refuses: %v", decErr)
		}
		if len(tools) != len(file.Tools) {
			t.Fatalf("%d tools from %d entries", len(tools), len(file.Tools))
		}
		for i, e := range file.Tools {
			got := tools[i]
			if got.Name != e.Name || got.Description != e.Description || !bytes.Equal(got.Params, e.Params) ||
				!slices.Equal(got.Secret, e.Secret) || got.Access != e.Access {
				t.Fatalf("tool %d is %+v, the file says %+v", i, got, e)
			}
			if got.Handler == nil {
				t.Fatalf("tool %d has no handler", i)
			}
			if got.Confirm.IsZero() != (e.Confirm == "") {
				t.Fatalf("tool %d: confirm %q gave a zero confirmation %v", i, e.Confirm, got.Confirm.IsZero())
			}
			u, perr := url.Parse(e.Callback)
			if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				t.Fatalf("tool %d: accepted the callback %q", i, e.Callback)
			}
		}
	})
}

// fzFirst returns the first JSON value in b (all of b when it is not JSON).
func fzFirst(b []byte) []byte {
	var raw json.RawMessage
	if json.NewDecoder(bytes.NewReader(b)).Decode(&raw) != nil {
		return b
	}
	return raw
}
