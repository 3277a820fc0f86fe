package run

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Recipe is a reusable definition of a Run, decoded from JSON with
// upstream's key names.
type Recipe struct {
	Description string `json:"description,omitempty"`
	Disabled    bool   `json:"disabled,omitempty"`
	// Args declares the public inputs: "name", "name:type",
	// "name:type=default" or "mode:enum(a,b)"; "!secret" after the type
	// ("pin:string!secret") marks a value that only the process sees.
	Args     []string                   `json:"args,omitempty"`
	Defaults map[string]json.RawMessage `json:"defaults,omitempty"`
	Values   map[string]json.RawMessage `json:"values,omitempty"`
	// Template is the command: a string, a list of nodes run in sequence,
	// or an object node {template, parallel, timeout, retry, label}.
	Template  json.RawMessage     `json:"template"`
	Async     bool                `json:"async,omitempty"`
	Singleton bool                `json:"singleton,omitempty"`
	Artifacts map[string]Artifact `json:"artifacts,omitempty"`
	// Control lists the actions the Run's service accepts.
	Control []string `json:"control,omitempty"`
	// Env declares environment variables of the Run's process: NAME →
	// template, with {placeholders} replaced by their (unquoted) values.
	// Names match ^[A-Z_][A-Z0-9_]*$; ASSENT_* names are the runtime's.
	Env map[string]string `json:"env,omitempty"`
	// Top-level template flags.
	Label    string  `json:"label,omitempty"`
	Parallel bool    `json:"parallel,omitempty"`
	Timeout  float64 `json:"timeout,omitempty"`
	Retry    int     `json:"retry,omitempty"`

	args []Arg
	root node
}

// Artifact is a declared output of a Run. In JSON it is either a path
// string or an object.
type Artifact struct {
	Path      string `json:"path"`
	Kind      string `json:"kind,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	Required  bool   `json:"required,omitempty"`
}

// UnmarshalJSON accepts the string or the object form.
func (a *Artifact) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*a = Artifact{Path: s}
	} else {
		type plain Artifact
		var p plain
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return fmt.Errorf("artifact must be a path or {path, kind?, media_type?, required?}: %v", err)
		}
		*a = Artifact(p)
	}
	if strings.TrimSpace(a.Path) == "" {
		return fmt.Errorf("artifact path is required")
	}
	return nil
}

// Arg is one declared Recipe argument.
type Arg struct {
	Name       string   `json:"name"`
	Type       string   `json:"type"` // string, path, int, number, bool, array or enum
	Enum       []string `json:"enum,omitempty"`
	Default    *string  `json:"default,omitempty"`
	HasDefault bool     `json:"-"`
	// Secret marks a value masked in every view and stored document; only
	// the process receives it.
	Secret bool `json:"secret,omitempty"`
}

// secretMarker, after an argument's type, marks it secret.
const secretMarker = "!secret"

var (
	argNamePattern     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	enumPattern        = regexp.MustCompile(`^enum\(([^()]*)\)$`)
	placeholderPattern = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)
)

// ParseArg parses one argument declaration.
func ParseArg(decl string) (Arg, error) {
	decl = strings.TrimSpace(decl)
	var a Arg
	rest := decl
	if i := strings.IndexByte(rest, '='); i >= 0 {
		d := rest[i+1:]
		a.Default, a.HasDefault = &d, true
		rest = rest[:i]
	}
	if strings.HasSuffix(rest, secretMarker) {
		a.Secret = true
		rest = strings.TrimSuffix(rest, secretMarker)
	}
	a.Name, a.Type = rest, "string"
	if i := strings.IndexByte(rest, ':'); i >= 0 {
		a.Name, a.Type = rest[:i], rest[i+1:]
	}
	if !argNamePattern.MatchString(a.Name) {
		return a, fmt.Errorf("invalid Recipe argument name in %q", decl)
	}
	if m := enumPattern.FindStringSubmatch(a.Type); m != nil {
		for _, v := range strings.Split(m[1], ",") {
			v = strings.TrimSpace(v)
			if v == "" {
				return a, fmt.Errorf("empty enum value in %q", decl)
			}
			a.Enum = append(a.Enum, v)
		}
		a.Type = "enum"
	}
	switch a.Type {
	case "string", "path", "int", "number", "bool", "array", "enum":
	default:
		return a, fmt.Errorf("unsupported Recipe argument type %q in %q; use string, path, int, number, bool, array or enum(a,b)", a.Type, decl)
	}
	if a.HasDefault {
		if _, err := a.coerce(json.RawMessage(strconv.Quote(*a.Default))); err != nil {
			return a, fmt.Errorf("default of %s: %v", a.Name, err)
		}
	}
	return a, nil
}

// coerce checks v against the argument's type and returns its shell text
// (already quoted for arrays).
func (a Arg) coerce(v json.RawMessage) (string, error) {
	var s string
	isString := json.Unmarshal(v, &s) == nil
	switch a.Type {
	case "string", "path":
		if isString {
			return s, nil
		}
		var n json.Number
		if json.Unmarshal(v, &n) == nil {
			return n.String(), nil
		}
		return "", fmt.Errorf("expected a string")
	case "int":
		if !isString {
			s = string(bytes.TrimSpace(v))
		}
		if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			return "", fmt.Errorf("expected an integer")
		}
		return s, nil
	case "number":
		if !isString {
			s = string(bytes.TrimSpace(v))
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return "", fmt.Errorf("expected a number")
		}
		return s, nil
	case "bool":
		if !isString {
			s = string(bytes.TrimSpace(v))
		}
		if s != "true" && s != "false" {
			return "", fmt.Errorf("expected true or false")
		}
		return s, nil
	case "enum":
		for _, e := range a.Enum {
			if isString && s == e {
				return s, nil
			}
		}
		return "", fmt.Errorf("expected one of %s", strings.Join(a.Enum, ", "))
	case "array":
		var items []json.RawMessage
		if isString {
			v = json.RawMessage(s)
		}
		if err := json.Unmarshal(v, &items); err != nil {
			return "", fmt.Errorf("expected an array")
		}
		parts := make([]string, len(items))
		for i, it := range items {
			t, err := Arg{Type: "string"}.coerce(it)
			if err != nil {
				return "", fmt.Errorf("array items must be strings or numbers")
			}
			parts[i] = ShellQuote(t)
		}
		return strings.Join(parts, " "), nil
	}
	return "", fmt.Errorf("unsupported type %s", a.Type)
}

var recipeFields = map[string]bool{
	"description": true, "disabled": true, "args": true, "defaults": true, "values": true, "template": true,
	"async": true, "singleton": true, "artifacts": true, "control": true, "label": true, "parallel": true,
	"timeout": true, "retry": true, "env": true,
}

var envNamePattern = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// Bounds of a Recipe's env.
const (
	envMaxVars       = 64
	envMaxValueBytes = 8 << 10
)

// DecodeRecipe parses and validates a Recipe. Unknown keys are refused, as
// are the removed "name" and "mailbox" keys.
func DecodeRecipe(b []byte) (*Recipe, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil || keys == nil {
		return nil, errorf(CodeInvalidRecipe, "Recipe must be a JSON object")
	}
	if _, ok := keys["mailbox"]; ok {
		return nil, errorf(CodeInvalidRecipe, "recipe.mailbox was removed; replace it with control: [\"action\"] and claim Controls by id")
	}
	if _, ok := keys["name"]; ok {
		return nil, errorf(CodeInvalidRecipe, "Recipe field name is not supported: a Recipe's identity is its file name")
	}
	var unknown []string
	for _, k := range sortedKeys(keys) {
		if !recipeFields[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		return nil, errorf(CodeInvalidRecipe, "unsupported Recipe fields: %s", strings.Join(unknown, ", "))
	}
	var r Recipe
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, errorf(CodeInvalidRecipe, "invalid Recipe: %v", err)
	}
	if err := r.validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

func (r *Recipe) validate() error {
	if r.Disabled {
		return errorf(CodeInvalidRecipe, "Template recipe is disabled")
	}
	if len(bytes.TrimSpace(r.Template)) == 0 || bytes.Equal(bytes.TrimSpace(r.Template), []byte("null")) {
		return errorf(CodeInvalidRecipe, "Template recipe must define template")
	}
	r.args = nil
	seen := map[string]bool{}
	for _, d := range r.Args {
		a, err := ParseArg(d)
		if err != nil {
			return errorf(CodeInvalidRecipe, "%v", err)
		}
		if seen[a.Name] {
			return errorf(CodeInvalidRecipe, "duplicate Recipe argument: %s", a.Name)
		}
		if RuntimeOwned(a.Name) {
			return errorf(CodeInvalidRecipe, "Recipe argument %s is runtime-owned", a.Name)
		}
		seen[a.Name] = true
		r.args = append(r.args, a)
	}
	for _, k := range sortedKeys(r.Defaults) {
		if RuntimeOwned(k) {
			return errorf(CodeInvalidRecipe, "Recipe defaults cannot set runtime-owned input: %s", k)
		}
		if len(r.args) > 0 && !seen[k] {
			return errorf(CodeInvalidRecipe, "Unknown Recipe default argument: %s", k)
		}
	}
	for _, k := range sortedKeys(r.Values) {
		if RuntimeOwned(k) {
			return errorf(CodeInvalidRecipe, "Recipe values cannot set runtime-owned input: %s", k)
		}
	}
	if len(r.Env) > envMaxVars {
		return errorf(CodeInvalidRecipe, "Recipe env declares %d variables; at most %d are allowed", len(r.Env), envMaxVars)
	}
	for _, k := range sortedKeys(r.Env) {
		if !envNamePattern.MatchString(k) {
			return errorf(CodeInvalidRecipe, "Recipe env name %q must match ^[A-Z_][A-Z0-9_]*$", k)
		}
		if strings.HasPrefix(k, "ASSENT_") {
			return errorf(CodeInvalidRecipe, "Recipe env name %s is reserved: ASSENT_* variables are set by the runtime", k)
		}
		if len(r.Env[k]) > envMaxValueBytes || strings.ContainsRune(r.Env[k], 0) {
			return errorf(CodeInvalidRecipe, "Recipe env %s must be at most %d bytes without NUL", k, envMaxValueBytes)
		}
	}
	ctl, err := NormalizeDeclaredControl(r.Control)
	if err != nil {
		return err
	}
	r.Control = ctl
	if r.Timeout < 0 || r.Retry < 0 || r.Retry > 100 {
		return errorf(CodeInvalidRecipe, "Recipe timeout must be ≥ 0 seconds and retry between 0 and 100")
	}
	if r.Singleton && !r.Async {
		return errorf(CodeInvalidRecipe, "singleton Recipes must declare async: true")
	}
	root, err := parseNode(r.Template, 0)
	if err != nil {
		return err
	}
	root = node{children: []node{root}, parallel: r.Parallel, timeout: r.Timeout, retry: r.Retry}
	if _, err := compile(root, nil); err != nil {
		return err
	}
	r.root = root
	return nil
}

// NormalizeDeclaredControl validates a Recipe's declared Control actions:
// non-empty trimmed tokens, at most 64 characters, unique, and none of the
// runtime-owned kill, archive and prune. Order is kept.
func NormalizeDeclaredControl(actions []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, a := range actions {
		a = strings.TrimSpace(a)
		if a == "" {
			return nil, errorf(CodeInvalidRecipe, "Recipe control actions must be non-empty strings")
		}
		if err := ValidateAction(a); err != nil {
			return nil, errorf(CodeInvalidRecipe, "Recipe control: %s", err.(*Error).Message)
		}
		if a == "kill" || a == "archive" || a == "prune" {
			return nil, errorf(CodeInvalidRecipe, "Recipe control action %s is runtime-reserved", a)
		}
		if seen[a] {
			return nil, errorf(CodeInvalidRecipe, "duplicate Recipe control action: %s", a)
		}
		seen[a] = true
		out = append(out, a)
	}
	return out, nil
}

// ArgList returns the parsed argument declarations.
func (r *Recipe) ArgList() []Arg { return append([]Arg(nil), r.args...) }

// node is one step of a command template.
type node struct {
	cmd      string // a leaf command (template string) when children is nil
	children []node
	parallel bool
	timeout  float64
	retry    int
	label    string
}

const maxTemplateDepth = 32

func parseNode(raw json.RawMessage, depth int) (node, error) {
	if depth > maxTemplateDepth {
		return node{}, errorf(CodeInvalidRecipe, "Recipe template is nested deeper than %d", maxTemplateDepth)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return node{}, errorf(CodeInvalidRecipe, "empty Recipe template node")
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return node{}, errorf(CodeInvalidRecipe, "invalid Recipe template string")
		}
		if strings.TrimSpace(s) == "" {
			return node{}, errorf(CodeInvalidRecipe, "Recipe template command is empty")
		}
		return node{cmd: s}, nil
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return node{}, errorf(CodeInvalidRecipe, "invalid Recipe template sequence")
		}
		if len(items) == 0 {
			return node{}, errorf(CodeInvalidRecipe, "Recipe template sequence is empty")
		}
		n := node{}
		for _, it := range items {
			c, err := parseNode(it, depth+1)
			if err != nil {
				return node{}, err
			}
			n.children = append(n.children, c)
		}
		return n, nil
	case '{':
		var o struct {
			Template json.RawMessage `json:"template"`
			Parallel bool            `json:"parallel"`
			Timeout  float64         `json:"timeout"`
			Retry    int             `json:"retry"`
			Label    string          `json:"label"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&o); err != nil {
			return node{}, errorf(CodeInvalidRecipe, "invalid Recipe template node (keys: template, parallel, timeout, retry, label): %v", err)
		}
		if o.Timeout < 0 || o.Retry < 0 || o.Retry > 100 {
			return node{}, errorf(CodeInvalidRecipe, "Recipe timeout must be ≥ 0 seconds and retry between 0 and 100")
		}
		inner, err := parseNode(o.Template, depth+1)
		if err != nil {
			return node{}, err
		}
		if inner.children == nil || inner.parallel || inner.timeout > 0 || inner.retry > 0 || inner.label != "" {
			// Keep the inner node's own flags: wrap it.
			inner = node{children: []node{inner}}
		}
		inner.parallel, inner.timeout, inner.retry, inner.label = o.Parallel, o.Timeout, o.Retry, o.Label
		return inner, nil
	}
	return node{}, errorf(CodeInvalidRecipe, "Recipe template must be a string, a list or an object")
}

// ShellQuote quotes s for a POSIX shell as one word.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Resolve merges values (caller values over Recipe values over defaults
// over inline defaults), checks each against its declared type, and
// returns the shell-ready value of every placeholder. Runtime values
// (run_id, state_dir) are added by the caller after this.
func (r *Recipe) Resolve(values map[string]json.RawMessage) (map[string]string, error) {
	for _, k := range sortedKeys(values) {
		if RuntimeOwned(k) {
			return nil, errorf(CodeInvalidRequest, "value %s is runtime-owned and cannot be supplied", k)
		}
	}
	pick := func(name string) (json.RawMessage, bool) {
		for _, m := range []map[string]json.RawMessage{values, r.Values, r.Defaults} {
			if v, ok := m[name]; ok {
				return v, true
			}
		}
		return nil, false
	}
	out := map[string]string{}
	if len(r.args) == 0 {
		for _, m := range []map[string]json.RawMessage{r.Defaults, r.Values, values} {
			for k, v := range m {
				s, err := Arg{Name: k, Type: "string"}.coerce(v)
				if err != nil {
					var b bool
					if json.Unmarshal(v, &b) != nil {
						return nil, errorf(CodeInvalidRequest, "value %s: %v", k, err)
					}
					s = strconv.FormatBool(b)
				}
				out[k] = s
			}
		}
		return out, nil
	}
	declared := map[string]bool{}
	for _, a := range r.args {
		declared[a.Name] = true
		v, ok := pick(a.Name)
		if !ok && a.HasDefault {
			v, ok = json.RawMessage(strconv.Quote(*a.Default)), true
		}
		if !ok {
			return nil, errorf(CodeInvalidRequest, "missing value for Recipe argument %s", a.Name)
		}
		s, err := a.coerce(v)
		if err != nil {
			return nil, errorf(CodeInvalidRequest, "value %s: %v", a.Name, err)
		}
		out[a.Name] = s
	}
	for _, k := range sortedKeys(values) {
		if !declared[k] && k != "run_id" {
			return nil, errorf(CodeInvalidRequest, "unknown Recipe argument: %s; declared: %s", k, strings.Join(sortedKeys(declared), ", "))
		}
	}
	return out, nil
}

// MaxScriptBytes bounds a compiled script. Nested timeouts quote their
// inner script again at every level, so the bound is checked as it grows.
const MaxScriptBytes = 1 << 20

var errScriptTooLarge = errorf(CodeInvalidRecipe, "Recipe template compiles to a script over 1 MiB; flatten nested timeouts or shorten values")

// Script compiles the Recipe's template into one POSIX shell script with
// every {placeholder} replaced by its shell-quoted value. Placeholders
// without a value are left as written, so shell constructs such as ${HOME}
// pass through.
func (r *Recipe) Script(values map[string]string) (string, error) {
	return compile(r.root, values)
}

func expand(s string, values map[string]string, quote bool) string {
	return placeholderPattern.ReplaceAllStringFunc(s, func(m string) string {
		name := m[1 : len(m)-1]
		v, ok := values[name]
		if !ok {
			return m
		}
		if quote {
			return ShellQuote(v)
		}
		return v
	})
}

// expandShell substitutes placeholders outside ${…} parameter expansions.
func expandShell(s string, values map[string]string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(expand(s, values, true))
			return b.String()
		}
		b.WriteString(expand(s[:i], values, true))
		j := strings.IndexByte(s[i:], '}')
		if j < 0 {
			b.WriteString(s[i:])
			return b.String()
		}
		b.WriteString(s[i : i+j+1])
		s = s[i+j+1:]
	}
}

func compile(n node, values map[string]string) (string, error) {
	var body string
	switch {
	case n.children == nil:
		body = expandShell(n.cmd, values)
	case n.parallel:
		var b strings.Builder
		for i, c := range n.children {
			sub, err := compile(c, values)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "( %s\n) & __p%d=$!\n", sub, i)
		}
		b.WriteString("__rc=0\n")
		for i := range n.children {
			fmt.Fprintf(&b, "wait $__p%d || __rc=$?\n", i)
		}
		b.WriteString("exit $__rc")
		body = b.String()
	case len(n.children) == 1:
		sub, err := compile(n.children[0], values)
		if err != nil {
			return "", err
		}
		body = sub
	default:
		parts := make([]string, len(n.children))
		for i, c := range n.children {
			sub, err := compile(c, values)
			if err != nil {
				return "", err
			}
			parts[i] = "( " + sub + "\n)"
		}
		body = strings.Join(parts, " &&\n")
	}
	if len(body) > MaxScriptBytes {
		return "", errScriptTooLarge
	}
	if n.timeout > 0 {
		secs := strconv.FormatFloat(n.timeout, 'f', -1, 64)
		body = "timeout --foreground -k 5 " + secs + " /bin/sh -c " + ShellQuote(body)
	}
	if n.retry > 0 {
		body = fmt.Sprintf("( __n=0\nuntil ( %s\n); do __rc=$?; __n=$((__n+1)); [ $__n -gt %d ] && exit $__rc; done\n:\n)", body, n.retry)
	}
	if len(body) > MaxScriptBytes {
		return "", errScriptTooLarge
	}
	return body, nil
}

// ArtifactPaths expands placeholders in the declared artifacts (without
// shell quoting) and resolves them against dir, the Run's directory. A path
// that resolves outside dir is refused invalid_request.
func (r *Recipe) ArtifactPaths(values map[string]string, dir string) (map[string]Artifact, error) {
	out := map[string]Artifact{}
	for _, name := range sortedKeys(r.Artifacts) {
		a := r.Artifacts[name]
		p, err := ConfinePath(dir, expand(a.Path, values, false))
		if err != nil {
			return nil, errorf(CodeInvalidRequest, "artifact %s: %s", name, err.(*Error).Message)
		}
		a.Path = p
		out[name] = a
	}
	return out, nil
}

// ConfinePath resolves p against dir (p may be relative or absolute) and
// returns the cleaned absolute path. A path that leaves dir, such as
// "../../etc/passwd" or "/etc/passwd", is refused invalid_request.
func ConfinePath(dir, p string) (string, error) {
	if strings.ContainsRune(p, 0) || strings.TrimSpace(p) == "" {
		return "", errorf(CodeInvalidRequest, "path %q is empty or contains NUL", p)
	}
	dir = filepath.Clean(dir)
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	p = filepath.Clean(p)
	if p == dir || !strings.HasPrefix(p, dir+string(filepath.Separator)) {
		return "", errorf(CodeInvalidRequest, "path %q is outside the Run's directory %s; artifacts must be inside it", p, dir)
	}
	return p, nil
}

// Environment returns the Recipe's env as NAME=value pairs, sorted, with
// placeholders replaced by values (unquoted).
func (r *Recipe) Environment(values map[string]string) []string {
	out := make([]string, 0, len(r.Env))
	for _, k := range sortedKeys(r.Env) {
		out = append(out, k+"="+strings.ReplaceAll(expand(r.Env[k], values, false), "\x00", ""))
	}
	return out
}

// SecretArgs lists the names of the arguments declared secret.
func (r *Recipe) SecretArgs() []string {
	var out []string
	for _, a := range r.args {
		if a.Secret {
			out = append(out, a.Name)
		}
	}
	return out
}

// Placeholders lists the placeholder names the template uses, sorted.
func (r *Recipe) Placeholders() []string {
	seen := map[string]bool{}
	var walk func(n node)
	walk = func(n node) {
		for _, m := range placeholderPattern.FindAllStringSubmatch(n.cmd, -1) {
			seen[m[1]] = true
		}
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(r.root)
	out := sortedKeys(seen)
	sort.Strings(out)
	return out
}
