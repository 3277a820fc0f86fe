package server_test

import (
	"encoding/json"
	"regexp"
	"strconv"
	"testing"

	"github.com/assent-run/assent/event"
	"github.com/assent-run/assent/internal/assenttest"
)

// TestPageStreamStartsWhereThePageWasDrawn checks that a page names the
// event it was drawn at, and that a stream opened after it delivers what
// was published between drawing the page and opening the stream.
func TestPageStreamStartsWhereThePageWasDrawn(t *testing.T) {
	k := assenttest.Start(t, nil)
	cookie, _ := k.SignIn()
	k.Publish(event.Event{Type: "test.before", Data: json.RawMessage(`{}`)})
	resp := k.Get("/inbox", cookie)
	page := assenttest.ReadAll(resp)
	m := regexp.MustCompile(`<body data-seq="([0-9]+)">`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the page names no event sequence:\n%.400s", page)
	}
	if want := k.Srv.Events().Seq(); m[1] != strconv.FormatInt(want, 10) {
		t.Fatalf("data-seq = %s, want %d, the bus's sequence when the page was drawn", m[1], want)
	}
	// Published after the page was drawn, before its stream opens.
	k.Srv.Events().Publish(event.Event{Type: "test.between", Data: json.RawMessage(`{}`)})
	sse := assenttest.NewSSE(k.Req("GET", "/v1/events?after="+m[1], k.Token, nil, nil))
	defer sse.Resp.Body.Close()
	if e := sse.Next(t); e.Type != "test.between" {
		t.Fatalf("the stream began with %s %s, want test.between", e.ID, e.Type)
	}
}
