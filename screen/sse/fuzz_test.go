package sse

import (
	"context"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// referenceEvents reads a whole event stream the way the HTML standard
// describes it, one step after another on the complete text: decode, drop
// one leading byte order mark, cut lines, interpret fields. The decoder must
// agree with it for every input and every split.
func referenceEvents(input []byte) []Event {
	s := strings.TrimPrefix(string(toValidUTF8(input)), "\ufeff")
	var events []Event
	var name, data string
	hasData := false
	for {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			return events // an unfinished line or event is dropped
		}
		line := s[:i]
		if strings.HasPrefix(s[i:], "\r\n") {
			s = s[i+2:]
		} else {
			s = s[i+1:]
		}
		switch {
		case line == "":
			if hasData {
				ev := Event{Name: name, Data: strings.TrimSuffix(data, "\n")}
				if ev.Name == "" {
					ev.Name = "message"
				}
				events = append(events, ev)
			}
			name, data, hasData = "", "", false
		case line[0] == ':':
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				name = value
			case "data":
				data += value + "\n"
				hasData = true
			}
		}
	}
}

func FuzzDecoder(f *testing.F) {
	seeds := []string{
		"event: chunk\ndata: {\"text\":\"a = Divider()\\n\"}\n\n",
		"\ufeffevent:done\r\ndata:{}\r\n\r\n",
		"data: a\rdata: b\r\r: ping\n\n",
		"data: \xe2\x82\n\ndata\n\nevent\n\n",
		"event: chunk\ndata: {\"text\":\ndata: \"x\"}\n",
	}
	for i, s := range seeds {
		f.Add([]byte(s), uint8(i))
	}
	f.Fuzz(func(t *testing.T, input []byte, split uint8) {
		want := referenceEvents(input)
		for _, n := range []int{0, 1, int(split%16) + 1} {
			got, err := decodeAll(string(input), n, 0)
			if err != nil {
				t.Fatalf("read=%d: %v", n, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("read=%d: events %q, reference %q", n, got, want)
			}
		}

		// The whole client gives the same result in any split too.
		var first *recorder
		var firstOutcome Outcome
		for _, n := range []int{0, 1, int(split%16) + 1} {
			resp := &http.Response{StatusCode: 200, Body: io.NopCloser(&pieceReader{data: input, n: n})}
			rec := newRecorder()
			o := new(Client).ReadResponse(context.Background(), resp, rec)
			if rec.ends != 1 {
				t.Fatalf("read=%d: parser ended %d times", n, rec.ends)
			}
			if first == nil {
				first, firstOutcome = rec, o
				continue
			}
			if rec.written.String() != first.written.String() || !reflect.DeepEqual(o, firstOutcome) {
				t.Fatalf("read=%d: written %q, outcome %+v; whole: %q, %+v", n, rec.written.String(), o, first.written.String(), firstOutcome)
			}
		}
	})
}
