package host

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/store"
	"github.com/assent-run/assent/tool"
	"github.com/assent-run/assent/wire"
)

// WriteJSON writes v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// WriteError writes the error answer for code, with the status the code
// has in the wire table.
func WriteError(w http.ResponseWriter, code wire.Code, message string) {
	wire.Write(w, wire.New(code, message))
}

// WriteAPIError writes e; a zero Status is the table's status of e.Code.
func WriteAPIError(w http.ResponseWriter, e *wire.Error) { wire.Write(w, e) }

// FromToolError converts a tool refusal to a wire error: its code keeps
// the table's status and retryable flag, its data is kept.
func FromToolError(te *tool.Error) *wire.Error {
	e := wire.New(wire.Code(te.Code), te.Message)
	e.Data = te.Data
	return e
}

// InternalMessage is the message of a failure inside the server; it does not
// leak internals.
const InternalMessage = "the request failed inside the server; try again, and report it if it persists"

// WriteToolError maps an error from a tool handler or a package API to an
// HTTP error: a *tool.Error keeps its code with the status of the wire
// table; anything else is a 500 whose message does not leak internals.
func WriteToolError(w http.ResponseWriter, err error) {
	var te *tool.Error
	if errors.As(err, &te) {
		WriteAPIError(w, FromToolError(te))
		return
	}
	if store.Unavailable(err) {
		WriteAPIError(w, FromToolError(StoreUnavailableError()))
		return
	}
	WriteError(w, wire.Internal, InternalMessage)
}

// StoreUnavailableError is the answer to a request that failed because the
// store could not be reached or could not write (see store.Unavailable):
// 503 store_unavailable, retryable. The failed transaction was rolled
// back; only when a connection is lost during the commit itself can the
// server not know, so the answer does not claim either way.
func StoreUnavailableError() *tool.Error {
	return tool.Errorf(string(wire.StoreUnavailable), "the store could not be reached or could not save; try again when it is reachable (GET /v1/ready tells when this node can reach it)")
}

// MaxBody is the default request body limit.
const MaxBody = 1 << 20

// DecodeJSON decodes the request body into v, refusing unknown fields,
// trailing data and bodies over limit bytes (maxBody when limit ≤ 0). On
// failure it writes a 400 invalid_request (or 413) and returns false.
func DecodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	if limit <= 0 {
		limit = MaxBody
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			WriteError(w, wire.TooLarge, fmt.Sprintf("the request body is over %d bytes", limit))
			return false
		}
		if errors.Is(err, io.EOF) {
			WriteError(w, wire.InvalidRequest, "the request body is empty; send a JSON object")
			return false
		}
		WriteAPIError(w, bodyError(err, reflect.TypeOf(v)))
		return false
	}
	if dec.More() {
		WriteError(w, wire.InvalidRequest, "the request body has data after the JSON object")
		return false
	}
	return true
}

// PrincipalOf returns the authenticated principal of r. Every route behind
// the auth middleware has one.
func PrincipalOf(r *http.Request) store.Principal {
	p, _ := auth.PrincipalFrom(r.Context())
	return p
}

func RetryAfter(w http.ResponseWriter, d time.Duration) {
	secs := int(d.Round(time.Second) / time.Second)
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
}

// Bearer returns the token of an "Authorization: Bearer" header.
func Bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:]), true
	}
	return "", false
}

// bodyError describes a request body that does not decode, in JSON's
// terms: a value of the wrong type names its field and the JSON type the
// field takes, never a Go type.
func bodyError(err error, root reflect.Type) *wire.Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := jsonPath(root, te.Field)
		if field == "" {
			return wire.New(wire.InvalidRequest, fmt.Sprintf("the request body must be %s, not %s", jsonType(te.Type), withArticle(te.Value))).
				WithData(map[string]any{"expected": jsonType(te.Type), "got": te.Value})
		}
		return wire.New(wire.InvalidRequest, fmt.Sprintf("%q must be %s, not %s", field, withArticle(jsonType(te.Type)), withArticle(te.Value))).
			WithData(map[string]any{"field": field, "expected": jsonType(te.Type), "got": te.Value})
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return wire.New(wire.InvalidRequest, "the request body is not valid JSON for this endpoint: "+msg)
}

// jsonPath returns the decoder's field path in the body's own names: the
// Go names of embedded structs, which the body does not spell, are left
// out.
func jsonPath(t reflect.Type, path string) string {
	if path == "" {
		return ""
	}
	var out []string
	for _, seg := range strings.Split(path, ".") {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case t == nil:
			out = append(out, seg)
		case t.Kind() == reflect.Struct:
			if f, ok := t.FieldByName(seg); ok && f.Anonymous && f.Tag.Get("json") == "" {
				t = f.Type // an embedded struct: its fields are the body's
				continue
			}
			out = append(out, seg)
			t = fieldType(t, seg)
		case t.Kind() == reflect.Map, t.Kind() == reflect.Slice, t.Kind() == reflect.Array:
			out = append(out, seg)
			t = t.Elem()
		default:
			out = append(out, seg)
			t = nil
		}
	}
	return strings.Join(out, ".")
}

// fieldType returns the type of t's field that the JSON name name
// decodes into, or nil.
func fieldType(t reflect.Type, name string) reflect.Type {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name || (tag == "" && strings.EqualFold(f.Name, name)) {
			return f.Type
		}
	}
	return nil
}

// jsonType names the JSON type that values of t decode from.
func jsonType(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "JSON value"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Struct, reflect.Map:
		return "object"
	}
	return "JSON value"
}

// withArticle puts "a" or "an" before a JSON type's name.
func withArticle(s string) string {
	switch {
	case s == "":
		return "a value"
	case strings.ContainsRune("aeiou", rune(s[0])):
		return "an " + s
	}
	return "a " + s
}
