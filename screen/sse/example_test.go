package sse_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/assent-run/assent/screen"
	"github.com/assent-run/assent/screen/sse"
)

func ExampleClient_Generate() {
	// A server that streams a two-line screen in three pieces.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: chunk\ndata: {\"text\":\"root = Card([ti\"}\n\n"+
			": ping\n\n"+
			"event: chunk\ndata: {\"text\":\"tle])\\ntitle = Heading(\\\"Pay\\\")\\n\"}\n\n"+
			"event: done\ndata: {\"stopReason\":\"end_turn\",\"model\":\"mock\",\"ms\":12}\n\n")
	}))
	defer srv.Close()

	p := screen.NewParser(screen.Options{})
	o, err := new(sse.Client).Generate(context.Background(), sse.Request{
		URL:     srv.URL + "/api/generate",
		Prompt:  "A payment screen",
		Version: screen.FormatVersion,
	}, p)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(o.Status, o.StopReason, o.Model, o.Elapsed)
	doc := p.Document()
	fmt.Println(doc.Ended(), doc.Root().Type, doc.Root().Children, doc.Node("title").Props["text"])
	// Output:
	// done end_turn mock 12ms
	// true Card [title] Pay
}
