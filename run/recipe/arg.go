package recipe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

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
	// Options lets a string, path, number or array value begin with "-"
	// or "+": the Recipe hands it to a program that is meant to read it
	// as an option. Without it such a value is refused, so a value never
	// becomes an option of the program it is given to.
	Options bool `json:"options,omitempty"`
	// Special lets a string or path value contain "[", "$" or "`".
	// Without it such a value is refused: bash evaluates a name or an
	// arithmetic operand that holds "a[$(cmd)]" and runs cmd, and a
	// template can reach that evaluation through variables, declare,
	// printf -v, [[ -v ]] and namerefs.
	Special bool `json:"special,omitempty"`
}

// The markers after an argument's type, in any order: "!secret" marks a
// secret, "!options" an argument whose value may be an option, "!special"
// one whose value may contain "[", "$" or "`".
const (
	secretMarker  = "!secret"
	optionsMarker = "!options"
	specialMarker = "!special"
)

// specialChars are the characters without which no value makes bash run a
// command when it evaluates the value as a name or in arithmetic: an array
// subscript ("["), expanded there ("$" or "`").
const specialChars = "[$`"

var (
	argNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	enumPattern    = regexp.MustCompile(`^enum\(([^()]*)\)$`)
)

// ParseArg parses one argument declaration: "name", "name:type",
// "name:type=default", "mode:enum(a,b)", with "!secret" after the type to
// mark a secret. A default must be a valid value of the type.
func ParseArg(decl string) (Arg, error) {
	decl = strings.TrimSpace(decl)
	var a Arg
	rest := decl
	if i := strings.IndexByte(rest, '='); i >= 0 {
		d := rest[i+1:]
		a.Default, a.HasDefault = &d, true
		rest = rest[:i]
	}
	for {
		if s, ok := strings.CutSuffix(rest, secretMarker); ok && !a.Secret {
			a.Secret, rest = true, s
			continue
		}
		if s, ok := strings.CutSuffix(rest, optionsMarker); ok && !a.Options {
			a.Options, rest = true, s
			continue
		}
		if s, ok := strings.CutSuffix(rest, specialMarker); ok && !a.Special {
			a.Special, rest = true, s
			continue
		}
		break
	}
	a.Name, a.Type = rest, "string"
	if name, typ, ok := strings.Cut(rest, ":"); ok {
		a.Name, a.Type = name, typ
	}
	if !argNamePattern.MatchString(a.Name) {
		return a, fmt.Errorf("invalid Recipe argument name in %q", decl)
	}
	if m := enumPattern.FindStringSubmatch(a.Type); m != nil {
		for v := range strings.SplitSeq(m[1], ",") {
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
	if a.Options && (a.Type == "bool" || a.Type == "enum") {
		return a, fmt.Errorf("%s in %q: only a string, path, int, number or array argument may take options (a negative number reads as one)", optionsMarker, decl)
	}
	if a.Special && a.Type != "string" && a.Type != "path" && a.Type != "array" {
		return a, fmt.Errorf("%s in %q: only a string, path or array argument may take the characters %s", specialMarker, decl, specialChars)
	}
	if a.HasDefault {
		if _, err := a.coerce(json.RawMessage(strconv.Quote(*a.Default))); err != nil {
			return a, fmt.Errorf("default of %s: %v", a.Name, err)
		}
	}
	return a, nil
}

// errOption refuses a value that begins with "-" or "+" for an argument
// not declared to take options.
var errOption = errors.New(`begins with "-" or "+", which the program it is handed to would read as an option (git --upload-pack=…, less +!cmd, vi +cmd, date +format); pass a value that begins with neither (for a file, write ./-name or ./+name), or declare the argument with ` + optionsMarker + ` in the Recipe when it is meant to be an option`)

// optionLike reports whether s begins as an option does for common
// programs: with "-" (getopt) or "+" (less, more, vi, tail, date, find's
// old syntax, and a positive number).
func optionLike(s string) bool {
	return strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+")
}

// errSpecial refuses a value that contains "[", "$" or "`" for an
// argument not declared to take them.
var errSpecial = errors.New("contains [, $ or `, which bash would evaluate if the Recipe's script ever used the value as a name or in arithmetic (a[$(cmd)] runs cmd); pass a value without them, or declare the argument with " + specialMarker + " in the Recipe when it must carry them and the script never evaluates it")

// coerce checks v against the argument's type and returns its shell text
// (already quoted for arrays).
func (a Arg) coerce(v json.RawMessage) (string, error) {
	var s string
	isString := json.Unmarshal(v, &s) == nil
	if !isString && a.Type != "string" && a.Type != "path" && a.Type != "array" {
		s = string(bytes.TrimSpace(v))
	}
	switch a.Type {
	case "string", "path":
		if !isString {
			var n json.Number
			if json.Unmarshal(v, &n) != nil {
				return "", fmt.Errorf("expected a string")
			}
			s = n.String()
		}
		if optionLike(s) && !a.Options {
			return "", errOption
		}
		if strings.ContainsAny(s, specialChars) && !a.Special {
			return "", errSpecial
		}
		return s, nil
	case "int":
		if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			return "", fmt.Errorf("expected an integer")
		}
		// A signed number is an option too: kill -1, head -5, tail +5.
		if optionLike(s) && !a.Options {
			return "", errOption
		}
		return s, nil
	case "number":
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return "", fmt.Errorf("expected a number")
		}
		if optionLike(s) && !a.Options {
			return "", errOption
		}
		return s, nil
	case "bool":
		if s != "true" && s != "false" {
			return "", fmt.Errorf("expected true or false")
		}
		return s, nil
	case "enum":
		if isString && slices.Contains(a.Enum, s) {
			return s, nil
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
			t, err := Arg{Type: "string", Options: a.Options, Special: a.Special}.coerce(it)
			if errors.Is(err, errOption) || errors.Is(err, errSpecial) {
				return "", err
			}
			if err != nil {
				return "", fmt.Errorf("array items must be strings or numbers")
			}
			parts[i] = ShellQuote(t)
		}
		return strings.Join(parts, " "), nil
	}
	return "", fmt.Errorf("unsupported type %s", a.Type)
}

// Resolve merges values (caller values over Recipe values over defaults
// over inline defaults), checks each against its declared type, and
// returns the shell-ready value of every placeholder. Runtime values
// (run_id, state_dir) are added by the caller after this.
func (r *Recipe) Resolve(values map[string]json.RawMessage) (map[string]string, error) {
	for _, k := range slices.Sorted(maps.Keys(values)) {
		if RuntimeOwned(k) {
			return nil, errorf(CodeInvalidRequest, "value %s is runtime-owned and cannot be supplied", k)
		}
	}
	out := map[string]string{}
	if len(r.args) == 0 {
		// Without declarations every value is a string (or a bool).
		for _, m := range []map[string]json.RawMessage{r.Defaults, r.Values, values} {
			for k, v := range m {
				s, err := Arg{Name: k, Type: "string"}.coerce(v)
				if errors.Is(err, errOption) || errors.Is(err, errSpecial) {
					return nil, errorf(CodeInvalidValue, "value %s %v", k, err)
				}
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
		v, ok := pick(a.Name, values, r.Values, r.Defaults)
		if !ok && a.HasDefault {
			v, ok = json.RawMessage(strconv.Quote(*a.Default)), true
		}
		if !ok {
			return nil, errorf(CodeInvalidRequest, "missing value for Recipe argument %s", a.Name)
		}
		s, err := a.coerce(v)
		if errors.Is(err, errOption) || errors.Is(err, errSpecial) {
			return nil, errorf(CodeInvalidValue, "value %s %v", a.Name, err)
		}
		if err != nil {
			return nil, errorf(CodeInvalidRequest, "value %s: %v", a.Name, err)
		}
		out[a.Name] = s
	}
	for _, k := range slices.Sorted(maps.Keys(values)) {
		if !declared[k] && k != "run_id" {
			return nil, errorf(CodeInvalidRequest, "unknown Recipe argument: %s; declared: %s", k, strings.Join(slices.Sorted(maps.Keys(declared)), ", "))
		}
	}
	return out, nil
}

// pick returns the value of name from the first layer that has one.
func pick(name string, layers ...map[string]json.RawMessage) (json.RawMessage, bool) {
	for _, m := range layers {
		if v, ok := m[name]; ok {
			return v, true
		}
	}
	return nil, false
}
