package assenttest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/assent-run/assent/auth"
	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Issue makes a principal of kind with a token, supervised by the
// workspace's owner when it is not a person.
func (k *Kit) Issue(kind, name string, grants ...string) (string, store.Principal) {
	k.T.Helper()
	tok, p, err := auth.IssueToken(context.Background(), k.DB, kind, name, grants, time.Now())
	if err != nil {
		k.T.Fatal(err)
	}
	return tok, p
}

// API sends body as JSON with a bearer token (a []byte body is sent as
// is) and returns the status, the answer decoded as an object, and the
// answer as text.
func (k *Kit) API(method, path, token string, body any) (int, map[string]any, string) {
	k.T.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			k.T.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	resp := k.Req(method, path, token, rd, map[string]string{"Content-Type": "application/json"})
	raw := ReadAll(resp)
	var out map[string]any
	_ = json.Unmarshal([]byte(raw), &out)
	return resp.StatusCode, out, raw
}

// Decide posts a person's decision form and returns where it redirected
// and the page there, which shows the outcome's banner.
func (k *Kit) Decide(path string, form url.Values, cookie *http.Cookie) (string, string) {
	k.T.Helper()
	resp := k.PostForm(path, form, cookie, k.HTTP.URL)
	if resp.StatusCode != http.StatusSeeOther {
		k.T.Fatalf("%s: %d %s", path, resp.StatusCode, ReadAll(resp))
	}
	loc := resp.Header.Get("Location")
	return loc, ReadAll(k.Get(loc, cookie))
}

// ErrCode returns the error code of a decoded error answer.
func ErrCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// CallTool calls an MCP tool and returns its structured result and
// whether it was an error.
func CallTool(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &out)
	return out, res.IsError
}

// MustJSON returns v as JSON; v must be encodable.
func MustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Publish publishes e on the server's event bus and returns it once the bus
// has delivered it (the first event of e's type and owner after the
// publication), with its sequence number. On PostgreSQL the bus is the
// store's shared log and an event comes back to its node after a round
// trip; on SQLite it is delivered at once.
func (k *Kit) Publish(e event.Event) event.Event {
	k.T.Helper()
	sub := k.Srv.Events().Subscribe(k.Srv.Events().Seq(), 0, func(got event.Event) bool {
		return got.Type == e.Type && got.Owner == e.Owner
	})
	defer sub.Close()
	k.Srv.Events().Publish(e)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := sub.Next(ctx)
	if err != nil {
		k.T.Fatalf("event %s not delivered: %v", e.Type, err)
	}
	return got
}
