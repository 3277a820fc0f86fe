package recipe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// node is one step of a command template.
type node struct {
	cmd      string // a leaf command (template string) when children is nil
	children []node
	parallel bool
	timeout  float64
	retry    int
	label    string
}

// Bounds of a template.
const (
	maxTemplateDepth = 32
	maxRetry         = 100
	// MaxScriptBytes bounds a compiled script. Nested timeouts quote their
	// inner script again at every level, so the bound is checked as it
	// grows.
	MaxScriptBytes = 1 << 20
)

var placeholderPattern = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)

var errScriptTooLarge = errorf(CodeInvalidRecipe, "Recipe template compiles to a script over 1 MiB; flatten nested timeouts or shorten values")

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
		n := node{children: make([]node, 0, len(items))}
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
		if o.Timeout < 0 || o.Retry < 0 || o.Retry > maxRetry {
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

// Script compiles the Recipe's template into one POSIX shell script. The
// values never become shell syntax: the script begins by exporting each
// value the template uses, shell-quoted, in a variable of its own
// (valueVar), and every {placeholder} reads that variable, quoted for where
// it stands: "${V}" outside quotes, ${V} inside double quotes and '"${V}"'
// inside single quotes. A parameter expansion's result is never parsed
// again, so no value, wherever its placeholder is written, runs as a
// command. Placeholders without a value are left as written, so shell
// constructs such as ${HOME} pass through. A script over MaxScriptBytes is
// refused invalid_recipe.
func (r *Recipe) Script(values map[string]string) (string, error) {
	body, err := compile(r.root, values)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, name := range r.Placeholders() {
		if v, ok := values[name]; ok {
			b.WriteString("export " + valueVar(name) + "=" + ShellQuote(v) + "\n")
		}
	}
	if b.Len() == 0 {
		return body, nil
	}
	b.WriteString(body)
	if b.Len() > MaxScriptBytes {
		return "", errScriptTooLarge
	}
	return b.String(), nil
}

// valueVar is the shell variable that holds the value of the placeholder
// name in a compiled script.
func valueVar(name string) string { return "__assent_v_" + name }

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
	return slices.Sorted(maps.Keys(seen))
}

// Expand replaces every {placeholder} of s that has a value with that
// value, unquoted; the others stay as written.
func Expand(s string, values map[string]string) string {
	return placeholderPattern.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := values[m[1:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// wholeNumber is a value that may stand in shell arithmetic.
var wholeNumber = regexp.MustCompile(`^-?[0-9]{1,18}$`)

// placeholderAt matches a {placeholder} at the start of a string.
var placeholderAt = regexp.MustCompile(`^\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// The shell quoting a placeholder stands in, as expandShell reads it.
const (
	outsideQuotes = iota
	inSingle
	inDouble
	inComment
)

// What opened a nested quoting context in a template.
const (
	openedParen     = iota // $( or ( : closes at )
	openedBacktick         // ` : closes at `
	openedArith            // $(( or (( : closes at ))
	openedOldArith         // $[ : closes at ]
	openedSubscript        // name[ outside quotes: closes at ]
	openedLet              // let : closes where its command ends
	openedTest             // [[ with an arithmetic comparison: closes at ]]
)

// arithmeticOpened reports whether a context opened by opened is one bash
// evaluates as arithmetic.
func arithmeticOpened(opened int) bool {
	return opened == openedArith || opened == openedOldArith || opened == openedSubscript || opened == openedLet || opened == openedTest
}

// arithmeticTest matches the operators by which [[ … ]] compares its
// operands as arithmetic expressions.
var arithmeticTest = regexp.MustCompile(`\s-(eq|ne|lt|le|gt|ge)\s`)

// isNameByte reports whether c may end a shell variable name.
func isNameByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// expandShell replaces each {placeholder} of s that has a value with a
// read of the variable holding it (see Script), quoted for where it
// stands; ${…} parameter expansions are copied as written. Command
// substitutions ($(…) and `…`) and subshells start quoting afresh, inside
// double quotes too, and end it where they close; inside $((…)) a value
// stands bare.
//
// A value read anywhere inside a context bash evaluates as arithmetic
// ($((…)), ((…)), $[…], let, an array subscript name[…], [[ … -eq … ]]),
// nested command substitutions included, must be a whole number: bash
// evaluates an arithmetic operand again, so "a[$(cmd)]" there runs cmd.
func expandShell(s string, values map[string]string) (string, error) {
	type frame struct{ state, opened int }
	var (
		b         strings.Builder
		state     = outsideQuotes
		wordStart = true
		outer     []frame // the contexts to return to, innermost last
	)
	top := func(opened int) bool { return len(outer) > 0 && outer[len(outer)-1].opened == opened }
	inArithmetic := func() bool {
		for _, f := range outer {
			if arithmeticOpened(f.opened) {
				return true
			}
		}
		return false
	}
	enter := func(text string, opened, inner int) {
		b.WriteString(text)
		outer = append(outer, frame{state, opened})
		state, wordStart = inner, true
	}
	leave := func() { state, outer = outer[len(outer)-1].state, outer[:len(outer)-1] }
	for i := 0; i < len(s); {
		c := s[i]
		live := state == outsideQuotes || state == inDouble // where $, ` and \ act
		switch {
		case live && strings.HasPrefix(s[i:], "${"):
			j := strings.IndexByte(s[i:], '}')
			if j < 0 {
				b.WriteString(s[i:])
				return b.String(), nil
			}
			b.WriteString(s[i : i+j+1])
			i, wordStart = i+j+1, false
			continue
		case c == '{' && state != inComment:
			if m := placeholderAt.FindStringSubmatch(s[i:]); m != nil {
				if v, ok := values[m[1]]; ok {
					// Some shells (bash) evaluate an arithmetic
					// operand again, array subscripts and all: there a
					// value must be a whole number.
					if inArithmetic() && !wholeNumber.MatchString(v) {
						return "", errorf(CodeInvalidRequest, "value of %s is used in shell arithmetic ($((…)), ((…)), let, an array subscript or [[ … -eq … ]]), so it must be a whole number, not %q", m[1], v)
					}
					ref := "${" + valueVar(m[1]) + "}"
					switch state {
					case outsideQuotes:
						ref = `"` + ref + `"`
					case inSingle:
						ref = `'"` + ref + `"'`
					}
					b.WriteString(ref)
					i, wordStart = i+len(m[0]), false
					continue
				}
			}
		case live && c == '\\' && i+1 < len(s):
			b.WriteString(s[i : i+2])
			i, wordStart = i+2, false
			continue
		case live && strings.HasPrefix(s[i:], "$(("):
			enter("$((", openedArith, inDouble)
			i += 3
			continue
		case state == outsideQuotes && wordStart && strings.HasPrefix(s[i:], "(("):
			enter("((", openedArith, inDouble)
			i += 2
			continue
		case live && strings.HasPrefix(s[i:], "$["):
			enter("$[", openedOldArith, inDouble)
			i += 2
			continue
		case (top(openedOldArith) || top(openedSubscript)) && (state == inDouble || state == outsideQuotes) && c == ']':
			b.WriteByte(c)
			leave()
			i, wordStart = i+1, false
			continue
		case state == outsideQuotes && c == '[' && i > 0 && isNameByte(s[i-1]) && !wordStart:
			enter("[", openedSubscript, outsideQuotes)
			i++
			continue
		case state == outsideQuotes && wordStart && strings.HasPrefix(s[i:], "let") && len(s) > i+3 && (s[i+3] == ' ' || s[i+3] == '\t'):
			enter("let", openedLet, outsideQuotes)
			i += 3
			continue
		case state == outsideQuotes && top(openedLet) && strings.IndexByte(";\n&|)", c) >= 0:
			leave()
			continue
		case state == outsideQuotes && wordStart && strings.HasPrefix(s[i:], "[["):
			if end := strings.Index(s[i:], "]]"); end >= 0 && arithmeticTest.MatchString(s[i:i+end]) {
				enter("[[", openedTest, outsideQuotes)
				i += 2
				continue
			}
		case state == outsideQuotes && top(openedTest) && strings.HasPrefix(s[i:], "]]"):
			b.WriteString("]]")
			leave()
			i, wordStart = i+2, false
			continue
		case top(openedArith) && state == inDouble && strings.HasPrefix(s[i:], "))"):
			b.WriteString("))")
			leave()
			i, wordStart = i+2, false
			continue
		case live && strings.HasPrefix(s[i:], "$("):
			enter("$(", openedParen, outsideQuotes)
			i += 2
			continue
		case state == outsideQuotes && c == '`' && top(openedBacktick):
			b.WriteByte(c)
			leave()
			i, wordStart = i+1, false
			continue
		case live && c == '`':
			enter("`", openedBacktick, outsideQuotes)
			i++
			continue
		case state == outsideQuotes && c == '(':
			enter("(", openedParen, outsideQuotes)
			i++
			continue
		case state == outsideQuotes && c == ')' && top(openedParen):
			b.WriteByte(c)
			leave()
			i, wordStart = i+1, false
			continue
		}
		switch {
		case state == inSingle && c == '\'',
			state == inDouble && c == '"' && !top(openedArith),
			state == inComment && c == '\n':
			state = outsideQuotes
		case state == outsideQuotes && c == '\'':
			state = inSingle
		case state == outsideQuotes && c == '"':
			state = inDouble
		case state == outsideQuotes && c == '#' && wordStart:
			state = inComment
		}
		b.WriteByte(c)
		wordStart = state == outsideQuotes && strings.IndexByte(" \t\n;&|<>", c) >= 0
		i++
	}
	return b.String(), nil
}

func compile(n node, values map[string]string) (string, error) {
	var body string
	switch {
	case n.children == nil:
		var err error
		if body, err = expandShell(n.cmd, values); err != nil {
			return "", err
		}
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
