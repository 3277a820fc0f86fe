package recipe

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestParseArg(t *testing.T) {
	tests := []struct {
		decl    string
		name    string
		typ     string
		def     string
		enum    []string
		wantErr bool
	}{
		{decl: "file", name: "file", typ: "string"},
		{decl: "file:path", name: "file", typ: "path"},
		{decl: "n:int=3", name: "n", typ: "int", def: "3"},
		{decl: "lang=ru", name: "lang", typ: "string", def: "ru"},
		{decl: "mode:enum(a,b)", name: "mode", typ: "enum", enum: []string{"a", "b"}},
		{decl: "mode:enum(a, b)=b", name: "mode", typ: "enum", enum: []string{"a", "b"}, def: "b"},
		{decl: "mode:enum(a,b)=c", wantErr: true},
		{decl: "n:int=x", wantErr: true},
		{decl: "flag:bool=true", name: "flag", typ: "bool", def: "true"},
		{decl: "x:float", wantErr: true},
		{decl: "1x", wantErr: true},
		{decl: "mode:enum()", wantErr: true},
	}
	for _, tc := range tests {
		a, err := ParseArg(tc.decl)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: err %v", tc.decl, err)
			continue
		}
		if err != nil {
			continue
		}
		def := ""
		if a.Default != nil {
			def = *a.Default
		}
		if a.Name != tc.name || a.Type != tc.typ || def != tc.def || strings.Join(a.Enum, ",") != strings.Join(tc.enum, ",") {
			t.Errorf("%s: %+v", tc.decl, a)
		}
	}
}

func TestDecodeRecipeRefusals(t *testing.T) {
	tests := []struct {
		json string
		want string
	}{
		{`{"template":"echo"}`, ""},
		{`[]`, "Recipe must be a JSON object"},
		{`{}`, "Template recipe must define template"},
		{`{"template":"x","name":"a"}`, "identity is its file name"},
		{`{"template":"x","mailbox":{}}`, "recipe.mailbox was removed"},
		{`{"template":"x","bogus":1}`, "unsupported Recipe fields: bogus"},
		{`{"template":"x","control":["pause","pause"]}`, "duplicate Recipe control action: pause"},
		{`{"template":"x","control":["kill"]}`, "runtime-reserved"},
		{`{"template":"x","control":["Pause"]}`, "invalid control action"},
		{`{"template":"x","control":[""]}`, "non-empty"},
		{`{"template":"x","args":["a"],"defaults":{"b":1}}`, "Unknown Recipe default argument: b"},
		{`{"template":"x","defaults":{"state_dir":"/"}}`, "runtime-owned"},
		{`{"template":"x","args":["a","a"]}`, "duplicate Recipe argument: a"},
		{`{"template":"x","singleton":true}`, "singleton Recipes must declare async: true"},
		{`{"template":"x","restart":"on_lost"}`, ""},
		{`{"template":"x","restart":"never"}`, ""},
		{`{"template":"x","restart":"always"}`, `Recipe restart must be "never" or "on_lost", not "always"`},
		{`{"template":"x","restart":true}`, "invalid Recipe"},
		{`{"template":[]}`, "sequence is empty"},
		{`{"template":{"template":"x","nope":1}}`, "invalid Recipe template node"},
		{`{"template":"x","disabled":true}`, "disabled"},
		{`{"template":"x","artifacts":{"r":{"path":""}}}`, "artifact path is required"},
	}
	for _, tc := range tests {
		_, err := Parse([]byte(tc.json))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if tc.want == "" && err != nil || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.json, got, tc.want)
		}
		if tc.want != "" && codeOf(err) != CodeInvalidRecipe {
			t.Errorf("%s: code %q, want %s", tc.json, codeOf(err), CodeInvalidRecipe)
		}
	}
}

func TestResolveValues(t *testing.T) {
	r, err := Parse([]byte(`{"args":["file:path","n:int=3","mode:enum(fast,slow)","tags:array=[]"],"defaults":{"mode":"fast"},"template":"echo {file} {n} {mode} {tags}"}`))
	if err != nil {
		t.Fatal(err)
	}
	v := func(s string) map[string]json.RawMessage {
		var m map[string]json.RawMessage
		json.Unmarshal([]byte(s), &m)
		return m
	}
	got, err := r.Resolve(v(`{"file":"a b.txt","n":5,"tags":["x","y z"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got["file"] != "a b.txt" || got["n"] != "5" || got["mode"] != "fast" || got["tags"] != `'x' 'y z'` {
		t.Fatalf("%v", got)
	}
	for _, bad := range []string{`{}`, `{"file":"a","n":"x"}`, `{"file":"a","mode":"medium"}`, `{"file":"a","state_dir":"/"}`, `{"file":"a","other":1}`} {
		if _, err := r.Resolve(v(bad)); codeOf(err) != CodeInvalidRequest {
			t.Errorf("%s: %v, want code %s", bad, err, CodeInvalidRequest)
		}
	}
}

func runScript(t *testing.T, script string) (string, int) {
	t.Helper()
	out, err := exec.Command("/bin/sh", "-c", script).CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

func TestScript(t *testing.T) {
	tests := []struct {
		recipe string
		values string
		out    string
		code   int
	}{
		{`{"args":["name"],"template":"echo hello {name}"}`, `{"name":"it's; rm -rf /tmp/nothing"}`, "hello it's; rm -rf /tmp/nothing\n", 0},
		{`{"template":["echo a","echo b"]}`, `{}`, "a\nb\n", 0},
		{`{"template":["echo a","exit 3","echo never"]}`, `{}`, "a\n", 3},
		{`{"template":{"parallel":true,"template":["exit 0","exit 4"]}}`, `{}`, "", 4},
		{`{"template":"echo $((1+1)) ${HOME:+home}","values":{"x":"1"}}`, `{}`, "2 home\n", 0},
		{`{"template":{"retry":2,"template":"echo try >> tries; [ $(wc -l < tries) -ge 3 ]"}}`, `{}`, "", 0},
		{`{"template":{"timeout":0.2,"template":"exec sleep 5"}}`, `{}`, "", 124},
		{`{"args":["n:int"],"template":"exit {n}"}`, `{"n":"7"}`, "", 7},
	}
	for _, tc := range tests {
		r, err := Parse([]byte(tc.recipe))
		if err != nil {
			t.Fatalf("%s: %v", tc.recipe, err)
		}
		var vals map[string]json.RawMessage
		json.Unmarshal([]byte(tc.values), &vals)
		res, err := r.Resolve(vals)
		if err != nil {
			t.Fatalf("%s: %v", tc.recipe, err)
		}
		dir := t.TempDir()
		script, err := r.Script(res)
		if err != nil {
			t.Fatal(err)
		}
		out, code := runScript(t, "cd "+ShellQuote(dir)+" && ( "+script+"\n)")
		if out != tc.out || code != tc.code {
			t.Errorf("%s: out %q code %d, want %q %d\nscript:\n%s", tc.recipe, out, code, tc.out, tc.code, script)
		}
	}
}

func TestNestedTimeoutsBounded(t *testing.T) {
	tpl := `"echo 'x'"`
	for i := 0; i < 30; i++ {
		tpl = `{"timeout":1,"template":` + tpl + `}`
	}
	if _, err := Parse([]byte(`{"template":` + tpl + `}`)); err == nil || !strings.Contains(err.Error(), "over 1 MiB") {
		t.Fatalf("nested timeouts: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"description":"d","args":["file:path","n:int=3","mode:enum(a,b)"],"defaults":{"mode":"a"},"template":"echo {file}","control":["pause","resume"],"artifacts":{"r":"{state_dir}/r.md"}}`))
	f.Add([]byte(`{"template":[{"parallel":true,"template":["a","b"]},{"retry":2,"timeout":3,"template":"c"}]}`))
	f.Add([]byte(`{"template":"x","mailbox":1}`))
	f.Add([]byte(`{"template":{"template":{"template":"x"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b)
		if err != nil {
			return
		}
		vals, err := r.Resolve(nil)
		if err != nil {
			return
		}
		if script, err := r.Script(vals); err == nil && len(script) > MaxScriptBytes {
			t.Fatalf("script of %d bytes", len(script))
		}
		for _, a := range r.Control {
			if CheckAction(a) != nil || a == "kill" || a == "archive" || a == "prune" {
				t.Fatalf("accepted control action %q", a)
			}
		}
	})
}

// TestExampleRecipes keeps the shipped example Recipes valid.
func TestExampleRecipes(t *testing.T) {
	files, _ := filepath.Glob("../../examples/runs/recipes/*.json")
	if len(files) == 0 {
		t.Fatal("no example recipes")
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(b); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestExampleReportRecipeRuns(t *testing.T) {
	b, _ := os.ReadFile("../../examples/runs/recipes/report.json")
	r, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := r.Resolve(map[string]json.RawMessage{"topic": json.RawMessage(`"disk usage"`)})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script, err := r.Script(vals)
	if err != nil {
		t.Fatal(err)
	}
	out, code := runScript(t, "cd "+ShellQuote(dir)+" && ( "+script+"\n)")
	report, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	if code != 0 || out != "parallel-step\n" || !strings.HasPrefix(string(report), "# Report on disk usage\n") {
		t.Fatalf("code %d out %q report %q", code, out, report)
	}
}

func TestRecipeEnvValidation(t *testing.T) {
	tests := []struct {
		env  string
		want string // "" = accepted
	}{
		{`{"TOKEN_FILE": "{state_dir}/t", "_X1": "v"}`, ""},
		{`{"lower": "v"}`, CodeInvalidRecipe},
		{`{"1ABC": "v"}`, CodeInvalidRecipe},
		{`{"ASSENT_RUN_TOKEN": "forged"}`, CodeInvalidRecipe},
		{`{"A-B": "v"}`, CodeInvalidRecipe},
		{`{"A": "` + strings.Repeat("x", envMaxValueBytes+1) + `"}`, CodeInvalidRecipe},
	}
	for _, tc := range tests {
		_, err := Parse([]byte(`{"template": "true", "env": ` + tc.env + `}`))
		if codeOf(err) != tc.want {
			t.Errorf("env %.40s: error %v, want code %q", tc.env, err, tc.want)
		}
	}
}

func TestConfinePath(t *testing.T) {
	dir := "/data/runs/r1"
	tests := []struct {
		p, want string
	}{
		{"out.txt", "/data/runs/r1/out.txt"},
		{"a/../b.txt", "/data/runs/r1/b.txt"},
		{"/data/runs/r1/x", "/data/runs/r1/x"},
		{"..", ""},
		{".", ""},
		{"../r1x/a", ""},
		{"/data/runs/r1x/a", ""},
		{"/etc/passwd", ""},
		{"", ""},
		{"a\x00b", ""},
	}
	for _, tc := range tests {
		got, err := ConfinePath(dir, tc.p)
		if tc.want == "" && err == nil || tc.want != "" && got != tc.want {
			t.Errorf("ConfinePath(%q) = %q, %v; want %q", tc.p, got, err, tc.want)
		}
	}
}

func FuzzConfinePath(f *testing.F) {
	for _, s := range []string{"out.txt", "../../etc/passwd", "/etc/passwd", "a/./b/../../..", "", "\x00", "//x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := ConfinePath("/data/runs/r1", p)
		if err == nil && !strings.HasPrefix(got, "/data/runs/r1/") {
			t.Fatalf("ConfinePath(%q) = %q escapes the Run directory", p, got)
		}
	})
}

func TestParseArgSecret(t *testing.T) {
	tests := []struct {
		decl, name, typ string
		secret          bool
		def             string
	}{
		{"pin!secret", "pin", "string", true, ""},
		{"pin:int!secret=1234", "pin", "int", true, "1234"},
		{"mode:enum(a,b)!secret", "mode", "enum", true, ""},
		{"note=x!secret", "note", "string", false, "x!secret"},
		{"plain:string", "plain", "string", false, ""},
	}
	for _, tc := range tests {
		a, err := ParseArg(tc.decl)
		if err != nil {
			t.Fatalf("%s: %v", tc.decl, err)
		}
		d := ""
		if a.Default != nil {
			d = *a.Default
		}
		if a.Name != tc.name || a.Type != tc.typ || a.Secret != tc.secret || d != tc.def {
			t.Errorf("ParseArg(%q) = %+v, want %s %s secret=%v default=%q", tc.decl, a, tc.name, tc.typ, tc.secret, tc.def)
		}
	}
	if _, err := ParseArg("pin:secret"); err == nil {
		t.Errorf("ParseArg(pin:secret) accepted an unknown type")
	}
}

func FuzzParseArg(f *testing.F) {
	for _, s := range []string{"pin!secret", "pin:int!secret=1", "mode:enum(a,b)!secret", "x=!secret", "!secret", ":!secret="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, decl string) {
		a, err := ParseArg(decl)
		if err == nil && !argNamePattern.MatchString(a.Name) {
			t.Fatalf("ParseArg(%q) accepted name %q", decl, a.Name)
		}
	})
}

func FuzzParseEnv(f *testing.F) {
	for _, s := range []string{
		`{"template": "true", "env": {"A": "{x}"}}`,
		`{"template": "true", "env": {"ASSENT_X": "1"}}`,
		`{"template": "true", "env": {"a": "1"}}`,
		`{"template": "true", "env": {"A": 1}}`,
		`{"template": "true", "env": null}`,
		`{"template": "true", "args": ["x!secret"], "env": {"X": "{x}\u0000"}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b string) {
		r, err := Parse([]byte(b))
		if err != nil {
			return
		}
		for _, kv := range r.Environment(map[string]string{"x": "v\x00w"}) {
			name, _, _ := strings.Cut(kv, "=")
			if !envNamePattern.MatchString(name) || strings.HasPrefix(name, "ASSENT_") || strings.ContainsRune(kv, 0) {
				t.Fatalf("Environment gave %q", kv)
			}
		}
	})
}

// codeOf returns the code of a refusal, or "" for nil or another error.
func codeOf(err error) string {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return ""
}

// TestValuesNeverRunAsCommands compiles templates that put a placeholder
// in every quoting a shell has and runs them with values that would break
// out of a naive quoting: each prints the value as written, and nothing
// the value holds runs.
func TestValuesNeverRunAsCommands(t *testing.T) {
	hostile := []string{
		`$(echo RAN)`, "`echo RAN`", `'; echo RAN; '`, `"; echo RAN; "`, `x;echo RAN;`,
		"x\necho RAN", `\'; echo RAN #`, `${IFS}echo${IFS}RAN`, `$((1+1))`, `a b  c*`,
	}
	tests := []struct {
		name, template string
		want           func(v string) string
	}{
		{"bare", `printf '%s\n' {v}`, nil},
		{"in double quotes", `printf '%s\n' "value: {v}"`, func(v string) string { return "value: " + v }},
		{"in single quotes", `printf '%s\n' 'value: {v}'`, func(v string) string { return "value: " + v }},
		{"in a command substitution", `printf '%s\n' "$(printf %s {v})"`, nil},
		{"in backticks", "printf '%s\\n' \"`printf %s {v}`\"", nil},
		{"in a subshell", `(printf '%s\n' {v})`, nil},
		{"after a comment", "printf '%s\\n' {v} # {v}", nil},
		{"in a here-document", "cat <<EOF\n{v}\nEOF", nil},
	}
	for _, tt := range tests {
		for _, v := range hostile {
			t.Run(tt.name+"/"+v, func(t *testing.T) {
				b, _ := json.Marshal(map[string]any{"args": []string{"v"}, "template": tt.template})
				r, err := Parse(b)
				if err != nil {
					t.Fatal(err)
				}
				script, err := r.Script(map[string]string{"v": v})
				if err != nil {
					t.Fatal(err)
				}
				out, code := runScript(t, script)
				if strings.Contains(out, "RAN") && !strings.Contains(v, "RAN") || strings.Count(out, "RAN") > strings.Count(v, "RAN")*strings.Count(tt.template, "{v}") {
					t.Fatalf("the value ran: %q\nscript:\n%s\nout: %q", v, script, out)
				}
				want := v
				if tt.want != nil {
					want = tt.want(v)
				}
				if code != 0 || !strings.Contains(out, want) {
					t.Fatalf("the value did not come through as written: exit %d, out %q, want %q\nscript:\n%s", code, out, want, script)
				}
			})
		}
	}
}

// A value read inside $((…)) must be a whole number: bash, where it is
// /bin/sh, evaluates an arithmetic operand again, array subscripts and
// command substitutions in them included.
func TestArithmeticTakesWholeNumbers(t *testing.T) {
	r, err := Parse([]byte(`{"args":["minutes"],"template":"echo $(( {minutes} * 60 ))"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		value string
		ok    bool
	}{{"5", true}, {"-2", true}, {"a[$(touch pwned)]", false}, {"5+1", false}, {"", false}} {
		script, err := r.Script(map[string]string{"minutes": tt.value})
		if (err == nil) != tt.ok {
			t.Fatalf("value %q: script %q, err %v; want ok %v", tt.value, script, err, tt.ok)
		}
		if tt.ok {
			if out, code := runScript(t, script); code != 0 || strings.TrimSpace(out) == "" {
				t.Fatalf("value %q: exit %d, out %q", tt.value, code, out)
			}
		}
	}
}

// A value that is not a whole number is refused wherever bash reads it as
// arithmetic, not only directly inside $((…)): there "a[$(cmd)]" runs cmd.
func TestArithmeticEverywhereTakesWholeNumbers(t *testing.T) {
	const attack = "a[$(touch pwned)]"
	for _, tmpl := range []string{
		"echo $(( {n} * 60 ))",
		"echo $(( $(echo {n}) ))",
		"echo $(( `echo {n}` + 1 ))",
		"(( {n} > 1 )) && echo big",
		"x=$(( 1 + $( printf %s {n} ) ))",
		"let x={n}+1",
		"let \"x = {n}\"",
		"a[{n}]=1",
		"a[$(echo {n})]=1",
		"echo $[ {n} + 1 ]",
		"[[ {n} -eq 1 ]] && echo one",
		"if [[ $(echo {n}) -gt 2 ]]; then echo big; fi",
	} {
		r, err := Parse([]byte(`{"args":["n"],"template":` + strconv.Quote(tmpl) + `}`))
		if err != nil {
			t.Fatalf("%s: %v", tmpl, err)
		}
		if script, err := r.Script(map[string]string{"n": attack}); err == nil {
			t.Errorf("template %q took %q into arithmetic:\n%s", tmpl, attack, script)
		}
		if _, err := r.Script(map[string]string{"n": "7"}); err != nil {
			t.Errorf("template %q refused a whole number: %v", tmpl, err)
		}
	}
	// Outside arithmetic, any value stands, quoted.
	for _, tmpl := range []string{"echo {n}", "let_me={n}; echo \"$let_me\"", "[[ {n} == x ]] && echo", "echo [{n}]", "echo \"a[{n}]\""} {
		r, err := Parse([]byte(`{"args":["n"],"template":` + strconv.Quote(tmpl) + `}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Script(map[string]string{"n": attack}); err != nil {
			t.Errorf("template %q refused a value outside arithmetic: %v", tmpl, err)
		}
	}
}

// A string or path value that begins with "-" or "+" is refused
// invalid_value, so it never becomes an option of the program it is
// handed to, unless the Recipe declares that the argument takes options
// (!options).
func TestValueNeverAnOption(t *testing.T) {
	tests := []struct {
		args  []string
		value string
		code  string
	}{
		{[]string{"repo:string"}, `"--upload-pack=touch /tmp/x;"`, CodeInvalidValue},
		{[]string{"repo"}, `"-oProxyCommand=x"`, CodeInvalidValue},
		{[]string{"file:path"}, `"-rf"`, CodeInvalidValue},
		{[]string{"n:string"}, `-5`, CodeInvalidValue},
		{[]string{"files:array"}, `["a","--exec=x"]`, CodeInvalidValue},
		{nil, `"--upload-pack=x"`, CodeInvalidValue},
		{[]string{"pin:string!secret"}, `"-1234"`, CodeInvalidValue},
		{[]string{"repo:string"}, `"git@example.com:x-y"`, ""},
		{[]string{"file:path"}, `"./-rf"`, ""},
		{[]string{"flags:string!options"}, `"--depth=1"`, ""},
		{[]string{"flags:string!secret!options"}, `"-p"`, ""},
		{[]string{"flags:string!options!secret"}, `"-p"`, ""},
		{[]string{"files:array!options"}, `["-v","x"]`, ""},
		{[]string{"n:int"}, `-5`, CodeInvalidValue},
		{[]string{"n:number"}, `-0.5`, CodeInvalidValue},
		{[]string{"n:int"}, `5`, ""},
		{[]string{"n:int!options"}, `-5`, ""},
		// "+" starts an option too: less +!cmd and more +cmd run cmd,
		// vi +cmd runs an editor command, date +fmt and tail +5 change
		// what the program does.
		{[]string{"file:path"}, `"+!touch /tmp/x"`, CodeInvalidValue},
		{[]string{"file:string"}, `"+:!touch /tmp/x"`, CodeInvalidValue},
		{[]string{"fmt"}, `"+%s"`, CodeInvalidValue},
		{nil, `"+!sh"`, CodeInvalidValue},
		{[]string{"files:array"}, `["a","+!sh"]`, CodeInvalidValue},
		{[]string{"pin:string!secret"}, `"+1234"`, CodeInvalidValue},
		{[]string{"n:int"}, `"+5"`, CodeInvalidValue},
		{[]string{"n:number"}, `"+0.5"`, CodeInvalidValue},
		{[]string{"file:path"}, `"./+x"`, ""},
		{[]string{"sum:string"}, `"1+1"`, ""},
		{[]string{"fmt:string!options"}, `"+%Y"`, ""},
		{[]string{"files:array!options"}, `["+10","x"]`, ""},
		{[]string{"n:int!options"}, `"+5"`, ""},
	}
	for _, tt := range tests {
		def := map[string]any{"template": "echo {v}"}
		name := "v"
		if tt.args != nil {
			name = strings.SplitN(strings.SplitN(tt.args[0], ":", 2)[0], "=", 2)[0]
			def["args"] = tt.args
			def["template"] = "echo {" + name + "}"
		}
		b, _ := json.Marshal(def)
		r, err := Parse(b)
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		_, err = r.Resolve(map[string]json.RawMessage{name: json.RawMessage(tt.value)})
		got := ""
		if e, ok := err.(*Error); ok {
			got = e.Code
		} else if err != nil {
			got = err.Error()
		}
		if got != tt.code {
			t.Errorf("args %v value %s: %v; want code %q", tt.args, tt.value, err, tt.code)
		}
	}
	// !options is for strings, paths, numbers and arrays only; a default
	// that begins with "-" needs it too.
	for _, decl := range []string{"b:bool!options", "m:enum(a,b)!options", "x:string=-v", "n:int=-1", "x:string=+v", "n:int=+1"} {
		if _, err := ParseArg(decl); err == nil {
			t.Errorf("ParseArg(%q) accepted", decl)
		}
	}
	for _, decl := range []string{"x:string!options=-v", "x:string!options=+v"} {
		if a, err := ParseArg(decl); err != nil || !a.Options {
			t.Errorf("ParseArg(%q) with options and a default: %+v, %v", decl, a, err)
		}
	}
}

// evaluatingTemplates reach bash's evaluation of a name or an arithmetic
// operand through a variable or a builtin rather than a placeholder
// written in arithmetic; a value "a[$(cmd)]" there runs cmd.
var evaluatingTemplates = []string{
	"x={n}; echo $((x))",
	"declare -i x={n}; echo $x",
	"[[ -v {n} ]] && echo set",
	"printf -v {n} %s 1",
	"declare -n r={n}; echo $r",
	"a=([{n}]=1); echo ${a[@]}",
}

// TestValueNeverEvaluated: a value with "[", "$" or "`" is refused
// invalid_value unless its argument is declared !special, so no template
// can hand bash a subscript to expand. The declared case runs each
// template under bash and shows the command does run there: what the
// refusal prevents is real.
func TestValueNeverEvaluated(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	for _, tmpl := range evaluatingTemplates {
		for _, args := range [][]string{{"n"}, {"n:string"}, {"n:path"}, {"n:string!secret"}} {
			b, _ := json.Marshal(map[string]any{"args": args, "template": tmpl})
			r, err := Parse(b)
			if err != nil {
				t.Fatalf("%s: %v", tmpl, err)
			}
			for _, v := range []string{"a[$(touch pwned)]", "a[`touch pwned`]", "$HOME", "a[1]"} {
				_, err := r.Resolve(map[string]json.RawMessage{"n": json.RawMessage(strconv.Quote(v))})
				if e, ok := err.(*Error); !ok || e.Code != CodeInvalidValue {
					t.Errorf("template %q, args %v, value %q: %v; want invalid_value", tmpl, args, v, err)
				}
			}
			if _, err := r.Resolve(map[string]json.RawMessage{"n": json.RawMessage(`"plain_name"`)}); err != nil {
				t.Errorf("template %q refused a plain value: %v", tmpl, err)
			}
		}

		b, _ := json.Marshal(map[string]any{"args": []string{"n:string!special"}, "template": tmpl})
		r, err := Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		values, err := r.Resolve(map[string]json.RawMessage{"n": json.RawMessage(`"a[$(touch pwned)]"`)})
		if err != nil {
			t.Fatalf("declared !special: %v", err)
		}
		script, err := r.Script(values)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		cmd := exec.Command(bash, "-c", script)
		cmd.Dir = dir
		_ = cmd.Run()
		if _, err := os.Stat(filepath.Join(dir, "pwned")); err != nil {
			t.Errorf("template %q under bash did not run the value's command; the case does not show what it claims", tmpl)
		}
	}
}

// FuzzResolveValue: a value the Resolve of a plain string argument
// accepts carries none of "[", "$" and "`" and begins with no "-" or "+", and the
// script built from it never fails to build for it.
func FuzzResolveValue(f *testing.F) {
	for _, tmpl := range evaluatingTemplates {
		f.Add(tmpl, "a[$(touch pwned)]")
	}
	f.Add("echo {n}", "plain")
	f.Add("echo $(( {n} + 1 ))", "7")
	f.Add("less {n}", "+!touch pwned")
	f.Add("vi {n} file", "+:!touch pwned")
	f.Add("date {n}", "+%s")
	f.Add("tail {n} log", "+5")
	f.Fuzz(func(t *testing.T, tmpl, v string) {
		b, _ := json.Marshal(map[string]any{"args": []string{"n:string"}, "template": tmpl})
		r, err := Parse(b)
		if err != nil {
			return
		}
		raw, _ := json.Marshal(v)
		values, err := r.Resolve(map[string]json.RawMessage{"n": raw})
		if err != nil {
			return
		}
		if got := values["n"]; strings.ContainsAny(got, "[$`") || strings.HasPrefix(got, "-") || strings.HasPrefix(got, "+") {
			t.Fatalf("value %q accepted", got)
		}
		_, _ = r.Script(values)
	})
}

func TestSpecialMarker(t *testing.T) {
	for _, decl := range []string{"n:int!special", "b:bool!special", "m:enum(a,b)!special", "x:string=$HOME", "x=a[1]"} {
		if _, err := ParseArg(decl); err == nil {
			t.Errorf("ParseArg(%q) accepted", decl)
		}
	}
	for _, decl := range []string{"x:string!special=$HOME", "p:path!secret!special", "l:array!special!options"} {
		if a, err := ParseArg(decl); err != nil || !a.Special {
			t.Errorf("ParseArg(%q) = %+v, %v; want special", decl, a, err)
		}
	}
}
