// Package recipe parses, validates and expands Recipes: the JSON
// definitions from which Runs are started.
//
// A Recipe declares typed arguments ("name", "name:type=default",
// "mode:enum(a,b)", "pin:string!secret"), fixed values and defaults, a
// command template, the Control actions its service accepts, environment
// variables and the artifacts it leaves behind. The template is a string,
// a list of nodes run in sequence, or an object node
// {template, parallel, timeout, retry, label}; Script compiles it into one
// POSIX shell script with every {placeholder} replaced by its shell-quoted
// value.
//
// The package is pure: it starts no process and touches no file. Package
// run supervises the processes a Recipe describes.
//
// Every refusal is an *Error with a stable code: invalid_recipe for a
// definition that cannot be used, invalid_request for values or paths a
// caller supplied.
package recipe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Error codes of the refusals this package returns.
const (
	// CodeInvalidRecipe refuses a Recipe definition.
	CodeInvalidRecipe = "invalid_recipe"
	// CodeInvalidRequest refuses values or paths given for a Recipe.
	CodeInvalidRequest = "invalid_request"
	// CodeInvalidValue refuses a value that could change what the
	// command does beyond its argument: one that begins with "-" or "+"
	// (an option to the program it is handed to) where the Recipe did not
	// declare that the argument takes options, or one with "[", "$" or "`"
	// where it did not declare !special.
	CodeInvalidValue = "invalid_value"
)

// Error is a refusal with a stable snake_case code and a message that says
// what to do.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Recipe is a reusable definition of a Run, decoded from JSON with
// upstream's key names. Parse returns a validated Recipe; its methods
// assume one.
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
	// Restart says what happens when the node supervising the Run stops
	// renewing its lease and another node finds the Run lost: "never"
	// (or empty), the Run stays lost; RestartOnLost, the node that found
	// it lost starts its next generation.
	Restart string `json:"restart,omitempty"`
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

var recipeFields = map[string]bool{
	"description": true, "disabled": true, "args": true, "defaults": true, "values": true, "template": true,
	"async": true, "singleton": true, "artifacts": true, "control": true, "label": true, "parallel": true,
	"timeout": true, "retry": true, "env": true, "restart": true,
}

// Values of a Recipe's "restart" field.
const (
	// RestartNever keeps a lost Run lost (the default).
	RestartNever = "never"
	// RestartOnLost starts the next generation of a lost Run on the node
	// that found it lost.
	RestartOnLost = "on_lost"
)

var envNamePattern = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)

// Bounds of a Recipe's env.
const (
	envMaxVars       = 64
	envMaxValueBytes = 8 << 10
)

// runtimeOwned lists the values a caller can never supply.
var runtimeOwned = map[string]bool{
	"owner_id": true, "recipe_dir": true, "run_instance_id": true, "runtime_state_root": true,
	"session_id": true, "skill_dir": true, "state_dir": true, "trace_file": true,
}

// RuntimeOwned reports whether name is a value the runtime sets for every
// Run (state_dir, run_instance_id, …), which neither a Recipe nor a caller
// may supply.
func RuntimeOwned(name string) bool { return runtimeOwned[name] }

// Parse decodes and validates a Recipe. Unknown keys are refused, as are
// the removed "name" and "mailbox" keys.
func Parse(b []byte) (*Recipe, error) {
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
	for _, k := range slices.Sorted(maps.Keys(keys)) {
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
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

// Validate checks r and prepares it for use. Parse calls it; call it again
// after changing a field of a parsed Recipe (its defaults, say).
func (r *Recipe) Validate() error {
	if r.Disabled {
		return errorf(CodeInvalidRecipe, "Template recipe is disabled")
	}
	if t := bytes.TrimSpace(r.Template); len(t) == 0 || bytes.Equal(t, []byte("null")) {
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
	for _, k := range slices.Sorted(maps.Keys(r.Defaults)) {
		if RuntimeOwned(k) {
			return errorf(CodeInvalidRecipe, "Recipe defaults cannot set runtime-owned input: %s", k)
		}
		if len(r.args) > 0 && !seen[k] {
			return errorf(CodeInvalidRecipe, "Unknown Recipe default argument: %s", k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(r.Values)) {
		if RuntimeOwned(k) {
			return errorf(CodeInvalidRecipe, "Recipe values cannot set runtime-owned input: %s", k)
		}
	}
	if len(r.Env) > envMaxVars {
		return errorf(CodeInvalidRecipe, "Recipe env declares %d variables; at most %d are allowed", len(r.Env), envMaxVars)
	}
	for _, k := range slices.Sorted(maps.Keys(r.Env)) {
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
	ctl, err := NormalizeControl(r.Control)
	if err != nil {
		return err
	}
	r.Control = ctl
	if r.Timeout < 0 || r.Retry < 0 || r.Retry > maxRetry {
		return errorf(CodeInvalidRecipe, "Recipe timeout must be ≥ 0 seconds and retry between 0 and 100")
	}
	if r.Singleton && !r.Async {
		return errorf(CodeInvalidRecipe, "singleton Recipes must declare async: true")
	}
	switch r.Restart {
	case "", RestartNever, RestartOnLost:
	default:
		return errorf(CodeInvalidRecipe, "Recipe restart must be %q or %q, not %q", RestartNever, RestartOnLost, r.Restart)
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

// ActionMaxLength bounds a Control action token.
const ActionMaxLength = 64

var actionPattern = regexp.MustCompile(`^[a-z][a-z0-9_-]*(?:\.[a-z0-9_-]+)*$`)

// IsToken reports whether s is a lowercase semantic token: segments of
// lowercase letters, digits, '_' and '-' separated by dots, the first
// starting with a letter. Control actions and Trace event kinds are
// tokens.
func IsToken(s string) bool { return actionPattern.MatchString(s) }

// CheckAction checks a Control or Trace action token: lowercase semantic
// segments separated by dots, at most ActionMaxLength characters. The
// error's message names what is wrong.
func CheckAction(action string) error {
	switch {
	case action == "":
		return fmt.Errorf("control.action is required")
	case !IsToken(action):
		return fmt.Errorf("invalid control action: %s", action)
	case len(action) > ActionMaxLength:
		return fmt.Errorf("control.action exceeds %d ASCII characters", ActionMaxLength)
	}
	return nil
}

// NormalizeControl validates a Recipe's declared Control actions:
// non-empty trimmed tokens (see CheckAction), unique, and none of the
// runtime-owned kill, archive and prune. Order is kept.
func NormalizeControl(actions []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, a := range actions {
		a = strings.TrimSpace(a)
		if a == "" {
			return nil, errorf(CodeInvalidRecipe, "Recipe control actions must be non-empty strings")
		}
		if err := CheckAction(a); err != nil {
			return nil, errorf(CodeInvalidRecipe, "Recipe control: %v", err)
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
func (r *Recipe) ArgList() []Arg { return slices.Clone(r.args) }

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

// Environment returns the Recipe's env as NAME=value pairs, sorted, with
// placeholders replaced by values (unquoted).
func (r *Recipe) Environment(values map[string]string) []string {
	out := make([]string, 0, len(r.Env))
	for _, k := range slices.Sorted(maps.Keys(r.Env)) {
		out = append(out, k+"="+strings.ReplaceAll(Expand(r.Env[k], values), "\x00", ""))
	}
	return out
}

// JSONSchema states that an Artifact is a path or an object, for the
// schemas of the tools that take one.
func (Artifact) JSONSchema() *jsonschema.Schema {
	// The object form's fields are Artifact's; the type has no methods,
	// so its schema is derived from them.
	type object Artifact
	obj, err := jsonschema.For[object](nil)
	if err != nil {
		obj = &jsonschema.Schema{Type: "object"}
	}
	return &jsonschema.Schema{AnyOf: []*jsonschema.Schema{{Type: "string"}, obj}}
}
