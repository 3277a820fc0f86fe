package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/screen"
)

// FuzzParseAddress feeds arbitrary addresses to parseAddress, and writes
// arbitrary control identities in the address grammar, and checks:
//   - an error is a usage error (exit status 2);
//   - success means a non-empty form and control, a subject type and id
//     both present or both absent, and an address that is exactly what was
//     parsed written back (FORM/CONTROL[@TYPE:ID]);
//   - an identity the registry accepts (control.Identity.Validate), written
//     FORM/CONTROL or FORM/CONTROL@TYPE:ID as the help says, is refused or
//     read back as that identity, never as another control.
func FuzzParseAddress(f *testing.F) {
	for _, s := range []struct {
		addr, form, ctl, typ, id string
		subj                     bool
	}{
		{"profile/email", "profile", "email", "", "", false},
		{"orders/status@order:42", "orders", "status", "order", "42", true},
		{"profile", "profile", "plan", "", "", false},
		{"/c", "f", "c", "t", "i", true},
		{"f/", "f", "c", "t", "a:b", true},
		{"f/c@", "f", "c", "t", "", true},
		{"f/c@t", "f", "c", "t", "i", true},
		{"f/c@:i", "f", "c", "", "", false},
		{"f/c@t:", "f", "c", "", "", false},
		{"f/c/d", "f", "c/d", "", "", false},
		{"f/c@t:i@j", "f", "c", "t", "i@j", true},
		{"f@x/c", "f", "c", "", "", false},
		{"caf\u00e9/\xff", "caf\u00e9", "\u202e", "", "", false},
		{strings.Repeat("f", 300) + "/c", strings.Repeat("f", 256), "c", "", "", false},
		{"", "", "", "", "", false},
	} {
		f.Add(s.addr, s.form, s.ctl, s.typ, s.id, s.subj)
	}
	f.Fuzz(func(t *testing.T, addr, form, ctl, typ, sid string, subj bool) {
		a, err := parseAddress(addr)
		if err != nil {
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != exitUsage {
				t.Fatalf("parseAddress(%q) = %v, not a usage error", addr, err)
			}
		} else {
			if a.form == "" || a.control == "" || (a.subjectType == "") != (a.subjectID == "") {
				t.Fatalf("parseAddress(%q) = %+v", addr, a)
			}
			if again, err := parseAddress(a.String()); err != nil || again != a {
				t.Fatalf("parseAddress(%q) = %+v, which writes as %q and reads back as %+v, %v", addr, a, a.String(), again, err)
			}
		}

		// Every valid identity, written as the CLI writes addresses,
		// reads back as itself.
		id := control.Identity{FormID: form, ControlID: ctl}
		w := address{form: form, control: ctl}
		if subj {
			id.Subject = &control.Subject{Type: typ, ID: sid}
			w.subjectType, w.subjectID = typ, sid
		}
		if id.Validate() != nil {
			return
		}
		written := w.String()
		got, err := parseAddress(written)
		if err != nil {
			t.Fatalf("the control %s, written %q, is refused: %v", id, written, err)
		}
		var gotSubj *control.Subject
		if got.subjectType != "" {
			gotSubj = &control.Subject{Type: got.subjectType, ID: got.subjectID}
		}
		if got.form != id.FormID || got.control != id.ControlID || (gotSubj == nil) != (id.Subject == nil) ||
			gotSubj != nil && (gotSubj.Type != id.Subject.Type || gotSubj.ID != id.Subject.ID) {
			t.Fatalf("the control %s, written %q, is read as form %q control %q subject %q:%q", id, written, got.form, got.control, got.subjectType, got.subjectID)
		}
	})
}

// fzScreenOpts are the registries the screen commands get from flags.
func fzScreenOpts() screen.Options {
	return screen.Options{Tools: []string{"payments.confirm"}, Assets: []string{"cabin-pines"}}
}

// fzCheckOutput is what "screen check" prints for p.
func fzCheckOutput(t *testing.T, p *screen.Parser) string {
	t.Helper()
	var b bytes.Buffer
	if err := writeCheck(&b, p.Document(), nil, false); err != nil {
		t.Fatalf("writeCheck: %v", err)
	}
	if !json.Valid(b.Bytes()) {
		t.Fatalf("check output is not JSON: %s", b.Bytes())
	}
	return b.String() + "\n" + screen.Describe(p.Document(), true)
}

// fzFailingReader returns data and then an error.
type fzFailingReader struct {
	r   io.Reader
	err error
}

func (f *fzFailingReader) Read(b []byte) (int, error) {
	n, err := f.r.Read(b)
	if err == io.EOF {
		return n, f.err
	}
	return n, err
}

// FuzzParseInput feeds arbitrary screens to parseInput, from standard input
// in pieces of several shapes and from a file, and checks:
//   - whatever way the bytes arrive, the result (check's JSON output and
//     the outline) is the one a parser given the whole screen at once
//     makes, and the document is ended;
//   - a read error, even after the whole screen arrived, is a refusal
//     (exit status 1) with no parser, never a half-read screen checked as
//     if it were whole.
func FuzzParseInput(f *testing.F) {
	for _, s := range []string{
		"root = Text(\"Hi\")\n",
		"root = Stack([a, b])\na = Text(\"Pay $42.50?\")\nb = Button(\"Pay\", action=McpMutation(\"payments.confirm\", {\"amount\": 42.5}))\n",
		"# omni-ir 99.0\nroot = Stack([a])\r\na = Divider()\r\n",
		"root = Text(\"caf\xc3\xa9 \xe2\x98\x95\")\n$x = -0\n",
		"\xff\xfe\xe2\x82\n\r\n\x00root = Divider()",
		"$n = 1\nroot = Stack([i])\ni = Input($n, label=\"x\")\n",
		"root = Image(\"cabin-pines\", \"Cabin\")",
		"root = Text(\"open\n",
		"",
		"\n\n\n",
		"$x = " + strings.Repeat("[", 3000) + "\n",
		"root = Text(\"" + strings.Repeat("x", 70000) + "\")\n",
	} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(3))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, how uint8) {
		whole := screen.NewParser(fzScreenOpts())
		_, _ = whole.Write(data)
		whole.End()
		want := fzCheckOutput(t, whole)

		var in io.Reader
		switch how % 4 {
		case 0:
			in = bytes.NewReader(data)
		case 1:
			in = iotest.OneByteReader(bytes.NewReader(data))
		case 2:
			in = iotest.HalfReader(bytes.NewReader(data))
		case 3:
			in = iotest.DataErrReader(bytes.NewReader(data))
		}
		args := []string{}
		if how&4 != 0 {
			args = []string{"-"}
		}
		p, err := parseInput(&cli{in: in, out: io.Discard, err: io.Discard}, args, fzScreenOpts())
		if err != nil || p == nil {
			t.Fatalf("parseInput from standard input: %v", err)
		}
		if !p.Document().Ended() {
			t.Fatal("the document is not ended")
		}
		if got := fzCheckOutput(t, p); got != want {
			t.Fatalf("reading in pieces (%d) changed the result:\n got %s\nwant %s", how%4, got, want)
		}

		if how&8 != 0 {
			path := filepath.Join(dir, "screen.omni")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			p, err := parseInput(&cli{in: strings.NewReader("ignored"), out: io.Discard, err: io.Discard}, []string{path}, fzScreenOpts())
			if err != nil || p == nil {
				t.Fatalf("parseInput from a file: %v", err)
			}
			if got := fzCheckOutput(t, p); got != want {
				t.Fatalf("reading the file changed the result:\n got %s\nwant %s", got, want)
			}
		}

		boom := errors.New("disk on fire")
		p, err = parseInput(&cli{in: &fzFailingReader{r: bytes.NewReader(data), err: boom}}, nil, fzScreenOpts())
		var ee *exitError
		if p != nil || !errors.As(err, &ee) || ee.code != exitRefused || !strings.Contains(ee.msg, "disk on fire") {
			t.Fatalf("a read error gave %v, %v", p, err)
		}
	})
}

// FuzzDecodeFlagJSON feeds arbitrary flag values to decodeFlagJSON, for
// --props (a map) and --value (any JSON), and checks:
//   - an error is a usage error (exit status 2) that names the flag;
//   - "must be a JSON object" is said only of valid JSON that is not an
//     object, and never of --value, which takes any JSON;
//   - "is not valid JSON" is said only of text that is not valid JSON;
//   - success means the text is valid JSON, an object or null for --props,
//     decoded as encoding/json decodes it.
func FuzzDecodeFlagJSON(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"required":true}`, `{"format":"email"}`, `{"minLength":3}`, `{"max":"2026-10-31"}`,
		`{"required":true,"options":["S","M"]}`, `null`, `""`, `"Ada"`, `"ada@example.com"`, `false`, `42`,
		`ada`, `{"required":}`, `[1]`, `{}}`, `"a" "b"`, ``, ` `, `1e308`, `{"minLength":1e308}`,
		`{"a":{"b":[[[[{"c":null}]]]]}}`, `123456789012345678901234567890`, "\"\xff\x00\"", `{"a":1,"a":2}`,
	} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, text string, props bool) {
		flag := "--value"
		var m map[string]any
		var v any
		var err error
		if props {
			flag = "--props"
			err = decodeFlagJSON(flag, text, &m)
		} else {
			err = decodeFlagJSON(flag, text, &v)
		}
		valid := json.Valid([]byte(text))
		if err != nil {
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != exitUsage || !strings.HasPrefix(ee.msg, flag+" ") {
				t.Fatalf("decodeFlagJSON(%s, %q) = %v, not a usage error naming the flag", flag, text, err)
			}
			if strings.Contains(ee.msg, "must be a JSON object") {
				isObject := strings.HasPrefix(strings.TrimSpace(text), "{")
				if !props || !valid || isObject {
					t.Fatalf("%s %q: %q, but the text is valid JSON %v, an object %v", flag, text, ee.msg, valid, isObject)
				}
			}
			if strings.Contains(ee.msg, "is not valid JSON") && valid {
				t.Fatalf("%s %q: %q, but the text is valid JSON", flag, text, ee.msg)
			}
			return
		}
		if !valid {
			t.Fatalf("%s accepted %q, which is not valid JSON", flag, text)
		}
		if props && m == nil && strings.TrimSpace(text) != "null" {
			t.Fatalf("--props %q gave no map", text)
		}
	})
}
