package render_test

import (
	"html/template"
	"strings"
	"testing"

	"github.com/assent-run/assent/screen"
	"github.com/assent-run/assent/screen/render"
)

func parse(t *testing.T, text string, end bool) *screen.Document {
	t.Helper()
	p := screen.NewParser(screen.Options{Tools: []string{"payments.send"}, Assets: []string{"logo", "none"}})
	if _, err := p.WriteString(text); err != nil {
		t.Fatal(err)
	}
	if end {
		return p.End()
	}
	return p.Document()
}

func draw(t *testing.T, v *render.View) string {
	t.Helper()
	var b strings.Builder
	if err := render.WriteHTML(&b, v.Root); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestBuild(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		end    bool
		opt    render.Options
		want   []string
		absent []string
	}{
		{
			name:   "text is escaped",
			stream: "root = Card([a], title=\"<b>x</b>\")\na = Text(\"<script>alert(1)</script>\")\n",
			end:    true,
			want:   []string{"&lt;script&gt;alert(1)&lt;/script&gt;", `aria-label="&lt;b&gt;x&lt;/b&gt;"`},
			absent: []string{"<script>", "<b>"},
		},
		{
			name:   "a child still to come is a placeholder, then a fallback",
			stream: "root = Stack([a, b])\na = Text(\"here\")\n",
			want:   []string{`id="n-b" role="status" aria-label="Loading"`, ">here<"},
		},
		{
			name:   "missing once ended",
			stream: "root = Stack([a, b])\na = Text(\"here\")\n",
			end:    true,
			want:   []string{render.WordMissing},
		},
		{
			name:   "secret state is hidden",
			stream: "root = Stack([a, pin])\n$pin = \"1234\"\na = Text($pin)\npin = Input($pin, label=\"PIN\")\n",
			end:    true,
			opt:    render.Options{Secret: map[string]bool{"$pin": true}},
			want:   []string{render.WordHidden, `type="password"`},
			absent: []string{"1234"},
		},
		{
			name:   "a button whose tool is unknown is blocked",
			stream: "root = Stack([go])\ngo = Button(\"Go\", action=\"go\")\ngoIt = McpMutation(go, tool=\"payments.send\", params={})\n",
			end:    true,
			want:   []string{"This can&#39;t be sent", `disabled`},
		},
		{
			name:   "a known tool's button is live",
			stream: "root = Stack([go])\ngo = Button(\"Go\", action=\"go\")\ngoIt = McpMutation(go, tool=\"payments.send\", params={})\n",
			end:    true,
			opt:    render.Options{Tool: func(n string) bool { return n == "payments.send" }},
			want:   []string{`data-press="go"`},
			absent: []string{"disabled", "be sent"},
		},
		{
			name:   "pictures come from the option",
			stream: "root = Stack([p, q])\np = Image(\"logo\", alt=\"Logo\")\nq = Image(\"none\", alt=\"Nothing\")\n",
			end:    true,
			opt: render.Options{Picture: func(n string) template.URL {
				if n == "logo" {
					return "data:image/png;base64,AAAA"
				}
				return ""
			}},
			want: []string{`src="data:image/png;base64,AAAA"`, `aria-label="Nothing"`},
		},
		{
			name:   "currency",
			stream: "root = Stack([a])\n$amt = 1234.5\na = Text($amt, format=\"currency\", currency=\"EUR\")\n",
			end:    true,
			want:   []string{"€1,234.50"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := render.Build(parse(t, tt.stream, tt.end), tt.opt)
			out := draw(t, v)
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("drawn HTML lacks %q:\n%s", w, out)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(out, a) {
					t.Errorf("drawn HTML has %q:\n%s", a, out)
				}
			}
		})
	}
}

func TestBuildFieldsAndTitle(t *testing.T) {
	doc := parse(t, "root = Card([h, e])\nh = Heading(\"Sign  up\")\n$e = \"\"\ne = Input($e, label=\"Email\", required=true)\n", true)
	v := render.Build(doc, render.Options{Message: func(n *screen.Node, key string) string {
		if key != "$e" {
			t.Errorf("field %s edits %q", n.ID, key)
		}
		return "This field is required."
	}})
	if v.Title != "Sign up" || len(v.Fields) != 1 || v.Fields[0].ID != "e" || v.Fields[0].Message != "This field is required." {
		t.Fatalf("view: title %q, fields %+v", v.Title, v.Fields)
	}
	if !strings.Contains(draw(t, v), `aria-invalid="true"`) {
		t.Error("the field with a message is not marked invalid")
	}
}

func TestMoney(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		cur  string
		want string
	}{{42.5, "", "$42.50"}, {-1234567.891, "EUR", "-€1,234,567.89"}, {5, "CHF", "5.00 CHF"}} {
		if got := render.Money(tc.f, tc.cur); got != tc.want {
			t.Errorf("Money(%v, %q) = %q, want %q", tc.f, tc.cur, got, tc.want)
		}
	}
}
