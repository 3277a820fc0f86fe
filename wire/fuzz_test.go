package wire

import (
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// FuzzDecode feeds arbitrary bodies to Decode and checks:
//   - ok and the result agree: ok ⇔ a non-nil error with a non-empty code;
//     not ok ⇒ nil (callers dereference the result when ok);
//   - Status is never read from a body (it is json:"-");
//   - a body Check accepts is one Decode reads, with the code Check saw
//     (the server's tests call Check and then use Decode's result);
//   - what Decode reads survives Write: Write sends the table's status for
//     the code, and Decode of the written body gives the same error back
//     (an empty data object and no data are the same).
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"error":{"code":"not_found","message":"no such thing","retryable":false}}`,
		`{"error":{"code":"REVISION_CONFLICT","message":"try again","retryable":true,"data":{"n":1}}}`,
		`{"error":{"code":"not_found","message":"m"}}`,
		`{"error":{"code":"not_found","message":"m","retryable":"no"}}`,
		`{"error":{"code":"notFound","message":"m","retryable":false}}`,
		`{"error":{"code":"x","message":"m","retryable":false,"data":[1]}}`,
		`{"error":{"code":"x","message":"m","retryable":false,"data":null}}`,
		`{"error":{"code":"x","message":"m","retryable":false,"data":{"a":{"b":[1,2,{"c":1e308}]}}}}`,
		`{"error":{"code":"x","message":"m","retryable":false,"data":{"n":123456789012345678901234567890}}}`,
		`{"code":"not_found","message":"m","retryable":false}}`,
		`{"ok":false,"reason":"not_found","message":"m"}`,
		`{"error":null}`,
		`{"error":{"code":""}}`,
		`{"error":{"code":"a","status":500}}`,
		`{"error":{"code":"a\u0000b","message":"\xff\xfe","retryable":true}}`,
		`{"Error":{"CODE":"rate_limited","Message":"slow down","RETRYABLE":true}}`,
		`{"error":{"code":"x","message":"` + strings.Repeat("m", 4096) + `","retryable":false}} `,
		`not json`,
		``,
		"\x00",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		e, ok := Decode(body)
		if ok != (e != nil) {
			t.Fatalf("Decode(%q) = %+v, %v: ok and a nil error disagree", body, e, ok)
		}
		if ok && e.Code == "" {
			t.Fatalf("Decode(%q) accepted an error without a code", body)
		}
		if ok && e.Status != 0 {
			t.Fatalf("Decode(%q) read a status %d from the body", body, e.Status)
		}
		if Check(body) == nil {
			if !ok {
				t.Fatalf("Check accepts %q but Decode does not read it", body)
			}
			var raw struct {
				Error map[string]json.RawMessage `json:"error"`
			}
			var code string
			if json.Unmarshal(body, &raw) == nil && json.Unmarshal(raw.Error["code"], &code) == nil && Code(code) != e.Code {
				t.Fatalf("Check saw code %q in %q, Decode read %q", code, body, e.Code)
			}
		}
		if !ok {
			return
		}
		rec := httptest.NewRecorder()
		sent := *e
		Write(rec, &sent)
		if want := Status(e.Code); rec.Code != want {
			t.Fatalf("Write sent %d for code %q, the table says %d", rec.Code, e.Code, want)
		}
		again, ok2 := Decode(rec.Body.Bytes())
		if !ok2 {
			t.Fatalf("Decode can't read what Write sent for %q: %s", body, rec.Body.Bytes())
		}
		if again.Code != e.Code || again.Message != e.Message || again.Retryable != e.Retryable || !(len(again.Data) == 0 && len(e.Data) == 0 || reflect.DeepEqual(again.Data, e.Data)) {
			t.Fatalf("round trip changed the error:\n  in  %+v\n  out %+v", e, again)
		}
	})
}
