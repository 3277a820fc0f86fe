package screen

import (
	"fmt"
	"math"
	"strconv"
)

// The grammar of SPEC section 4. A line is tokenized whole first, so a
// tokenizer error (a bad character, a single quote, an unterminated string)
// wins over a grammar error later in the line; then a recursive-descent parser
// reads the tokens. Nesting is bounded before recursing ([4.13]), so no input
// can make the parser recurse more than maxNesting levels.

type tokKind uint8

const (
	tokIdent tokKind = iota + 1
	tokString
	tokNumber
	tokState
	tokPunct
)

// A token holds no pointers: its text is a range of the line being read,
// or, for a string with escapes, an entry of the grammar's unescaped
// strings. Tokens are written for every line, and pointer-free ones cost
// the garbage collector nothing.
type token struct {
	kind tokKind
	p    byte  // punctuation
	esc  int32 // 1 + index into grammar.unesc, or 0 when the text is line[off:end]
	col  int32 // 1-based byte column in the line
	off  int32
	end  int32
	num  float64
}

// ref is a bare identifier used as a value: a reference to a component.
type ref string

// refList is a list written as plain ids. It stands only for children
// lists: every other place rejects a list of ids.
type refList []string

func isLiteralWord(s string) bool { return s == "true" || s == "false" || s == "null" }

// callValue marks a call written inside a value; it is always rejected
// (not_flat, [4.12]).
type callValue struct{ name string }

// rawObject is an object literal as written, before its keys are checked.
type rawObject struct {
	keys []string
	vals []Value
}

// lineError is an error found while reading one line.
type lineError struct {
	code string
	msg  string
}

func (e *lineError) Error() string { return e.code + ": " + e.msg }

func errAt(code string, col int, format string, args ...any) *lineError {
	return &lineError{code: code, msg: fmt.Sprintf("column %d: ", col) + fmt.Sprintf(format, args...)}
}

// rawArg is one argument of a call; name is empty for a positional one.
type rawArg struct {
	name string
	col  int
	val  Value
	// A string argument is kept unboxed in str (with isStr set and val
	// nil), so that the checks can box it once, or share a boxed copy.
	str   string
	isStr bool
}

// rawStmt is a line that passed the grammar.
type rawStmt struct {
	target  string // id, or $key for state
	isState bool
	call    string // component name
	args    []rawArg
	value   Value // state value
}

// isJSSpace reports whether r is white space in the sense of JavaScript's \s,
// which the reference uses to find blank lines and the start of a statement.
func isJSSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// skipJSSpace returns the index of the first non-space rune at or after i.
func skipJSSpace(s string, i int) int {
	for i < len(s) {
		if s[i] < 0x80 {
			if !isJSSpace(rune(s[i])) {
				return i
			}
			i++
			continue
		}
		var r rune
		var n int
		r, n = decodeRune(s[i:])
		if !isJSSpace(r) {
			return i
		}
		i += n
	}
	return i
}

// isBlank reports whether a line is ignored ([3.6]): empty, white space only,
// or a comment.
func isBlank(s string) bool {
	i := skipJSSpace(s, 0)
	return i == len(s) || s[i] == '#'
}

// grammar holds scratch space reused across lines.
type grammar struct {
	line     string   // the line being read
	unesc    []string // strings of the current line that had escapes
	toks     []token
	idBuf    []string // the ids of a plain list being read
	argBuf   []rawArg // the top-level call's arguments, reused
	pos      int
	warnings []string // unknown_escape messages of the current line
}

// text returns the text of an identifier, state key or string token.
func (g *grammar) text(t *token) string {
	if t.esc > 0 {
		return g.unesc[t.esc-1]
	}
	return g.line[t.off:t.end]
}

// parseLine reads one non-blank line.
func (g *grammar) parseLine(line string) (rawStmt, *lineError) {
	g.warnings = g.warnings[:0]
	g.line = line
	if len(g.unesc) > 0 {
		clear(g.unesc)
		g.unesc = g.unesc[:0]
	}
	var st rawStmt
	i := skipJSSpace(line, 0)
	start := i
	if i < len(line) && line[i] == '$' {
		st.isState = true
		i++
	}
	if i >= len(line) || !isIdentStart(line[i]) {
		return st, errAt("syntax", i+1, "expected name = Component(…) or $name = value")
	}
	for i < len(line) && isIdentChar(line[i]) {
		i++
	}
	st.target = line[start:i]
	i = skipJSSpace(line, i)
	if i >= len(line) || line[i] != '=' || (i+1 < len(line) && line[i+1] == '=') {
		return st, errAt("syntax", i+1, "expected name = Component(…) or $name = value")
	}
	i = skipJSSpace(line, i+1)
	if err := g.tokenize(line, i); err != nil {
		return st, err
	}
	g.pos = 0
	if st.isState {
		if len(g.toks) == 0 {
			return st, errAt("syntax", len(line)+1, "expected a value after =")
		}
		v, err := g.value(0)
		if err != nil {
			return st, err
		}
		st.value = v
	} else {
		if len(g.toks) < 2 || g.toks[0].kind != tokIdent || !g.toks[1].isPunct('(') {
			col := len(line) + 1
			if len(g.toks) > 0 {
				col = int(g.toks[0].col)
			}
			return st, errAt("syntax", col, "expected a component call such as Text(\"…\")")
		}
		st.call = g.text(&g.toks[0])
		g.pos = 1
		args, err := g.args(0, g.argBuf[:0])
		if err != nil {
			return st, err
		}
		st.args = args
		if cap(args) != cap(g.argBuf) {
			g.argBuf = args // it grew; keep the larger buffer
		}
	}
	if g.pos < len(g.toks) {
		return st, errAt("syntax", int(g.toks[g.pos].col), "unexpected text after the statement; write one statement per line")
	}
	return st, nil
}

func (t *token) isPunct(c byte) bool { return t.kind == tokPunct && t.p == c }

// tokenize splits line[i:] into tokens, stopping at a comment.
func (g *grammar) tokenize(line string, i int) *lineError {
	g.toks = g.toks[:0]
	for i < len(line) {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c == '#':
			return nil
		case c == '"':
			t, n, err := g.str(line, i)
			if err != nil {
				return err
			}
			g.toks = append(g.toks, t)
			i = n
		case c == '\'':
			return errAt("syntax", i+1, "strings must use double quotes")
		case c == '$':
			j := i + 1
			if j >= len(line) || !isIdentStart(line[j]) {
				return errAt("syntax", i+1, "expected a state key after $")
			}
			for j < len(line) && isIdentChar(line[j]) {
				j++
			}
			g.toks = append(g.toks, token{kind: tokState, col: int32(i + 1), off: int32(i), end: int32(j)})
			i = j
		case isDigit(c) || c == '.' || c == '-':
			j := scanNumber(line, i)
			if j == i {
				return errAt("syntax", i+1, "malformed number")
			}
			if j < len(line) && isIdentChar(line[j]) {
				return errAt("syntax", i+1, "a number can't be followed directly by a letter, digit or _")
			}
			f, _ := strconv.ParseFloat(line[i:j], 64) // ±Inf survives: the schema rejects it
			if f == 0 {
				f = 0 // negative zero is zero ([4.9])
			}
			g.toks = append(g.toks, token{kind: tokNumber, col: int32(i + 1), num: f})
			i = j
		case isIdentStart(c):
			j := i + 1
			for j < len(line) && isIdentChar(line[j]) {
				j++
			}
			g.toks = append(g.toks, token{kind: tokIdent, col: int32(i + 1), off: int32(i), end: int32(j)})
			i = j
		case c == '(' || c == ')' || c == '[' || c == ']' || c == '{' || c == '}' || c == ',' || c == '=' || c == ':':
			g.toks = append(g.toks, token{kind: tokPunct, col: int32(i + 1), p: c})
			i++
		default:
			return errAt("syntax", i+1, "unexpected character %q", string(firstRune(line[i:])))
		}
	}
	return nil
}

// str reads the string starting at line[i] == '"' and returns its token
// and the index after the closing quote.
func (g *grammar) str(line string, i int) (token, int, *lineError) {
	start := i
	i++
	// Fast path: no escapes.
	j := i
	for j < len(line) && line[j] != '"' && line[j] != '\\' {
		j++
	}
	if j < len(line) && line[j] == '"' {
		return token{kind: tokString, col: int32(start + 1), off: int32(i), end: int32(j)}, j + 1, nil
	}
	buf := make([]byte, 0, j-i+16)
	buf = append(buf, line[i:j]...)
	i = j
	for i < len(line) {
		c := line[i]
		switch c {
		case '"':
			g.unesc = append(g.unesc, string(buf))
			return token{kind: tokString, col: int32(start + 1), esc: int32(len(g.unesc))}, i + 1, nil
		case '\\':
			if i+1 >= len(line) {
				return token{}, 0, errAt("unterminated_string", start+1, "the string has no closing double quote")
			}
			e := line[i+1]
			switch e {
			case '"':
				buf = append(buf, '"')
			case '\\':
				buf = append(buf, '\\')
			case 'n':
				buf = append(buf, '\n')
			default:
				r, n := decodeRune(line[i+1:])
				buf = append(buf, '\\')
				buf = append(buf, line[i+1:i+1+n]...)
				g.warnings = append(g.warnings, fmt.Sprintf("column %d: %q is not an escape and was kept as written; write \\\\ for a backslash", i+1, "\\"+string(r)))
				i += 1 + n
				continue
			}
			i += 2
		default:
			buf = append(buf, c)
			i++
		}
	}
	return token{}, 0, errAt("unterminated_string", start+1, "the string has no closing double quote")
}

// scanNumber matches -?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)? at line[i:] and
// returns the index after it (i when nothing matches).
func scanNumber(s string, i int) int {
	j := i
	if j < len(s) && s[j] == '-' {
		j++
	}
	d := j
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	if j > d {
		if j < len(s) && s[j] == '.' {
			j++
			for j < len(s) && isDigit(s[j]) {
				j++
			}
		}
	} else {
		if j >= len(s) || s[j] != '.' {
			return i
		}
		j++
		f := j
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		if j == f {
			return i
		}
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		e := k
		for k < len(s) && isDigit(s[k]) {
			k++
		}
		if k > e {
			j = k
		}
	}
	return j
}

func (g *grammar) peek() *token {
	if g.pos < len(g.toks) {
		return &g.toks[g.pos]
	}
	return nil
}

func (g *grammar) endCol() int {
	if len(g.toks) == 0 {
		return 1
	}
	return int(g.toks[len(g.toks)-1].col) + 1
}

func (g *grammar) colHere() int {
	if t := g.peek(); t != nil {
		return int(t.col)
	}
	return g.endCol()
}

// args reads an argument list into out; g.pos is at '('.
func (g *grammar) args(depth int, out []rawArg) ([]rawArg, *lineError) {
	g.pos++ // (
	named := false
	for {
		t := g.peek()
		if t == nil {
			return nil, errAt("syntax", g.endCol(), "missing )")
		}
		if t.isPunct(')') {
			g.pos++
			return out, nil
		}
		var a rawArg
		a.col = int(t.col)
		if t.kind == tokIdent && g.pos+1 < len(g.toks) && g.toks[g.pos+1].isPunct('=') {
			a.name = g.text(t)
			named = true
			g.pos += 2
		} else if named {
			return nil, errAt("syntax", int(t.col), "positional arguments must come before named ones")
		}
		if t := g.peek(); t != nil && t.kind == tokString {
			a.str, a.isStr = g.text(t), true
			g.pos++
		} else {
			v, err := g.value(depth)
			if err != nil {
				return nil, err
			}
			a.val = v
		}
		out = append(out, a)
		t = g.peek()
		switch {
		case t == nil:
			return nil, errAt("syntax", g.endCol(), "missing )")
		case t.isPunct(','):
			g.pos++
		case t.isPunct(')'):
		default:
			return nil, errAt("syntax", int(t.col), "expected , or )")
		}
	}
}

// value reads one value at nesting depth depth.
func (g *grammar) value(depth int) (Value, *lineError) {
	t := g.peek()
	if t == nil {
		return nil, errAt("syntax", g.endCol(), "expected a value")
	}
	switch t.kind {
	case tokString:
		g.pos++
		return g.text(t), nil
	case tokNumber:
		g.pos++
		return t.num, nil
	case tokState:
		g.pos++
		return StateRef(g.text(t)), nil
	case tokIdent:
		g.pos++
		text := g.text(t)
		switch text {
		case "true":
			return true, nil
		case "false":
			return false, nil
		case "null":
			return nil, nil
		}
		if n := g.peek(); n != nil && n.isPunct('(') {
			if depth+1 > maxNesting {
				return nil, errAt("syntax", int(n.col), "values may nest at most %d levels deep", maxNesting)
			}
			if _, err := g.args(depth+1, nil); err != nil {
				return nil, err
			}
			return callValue{name: text}, nil
		}
		return ref(text), nil
	case tokPunct:
		switch t.p {
		case '[':
			if depth+1 > maxNesting {
				return nil, errAt("syntax", int(t.col), "values may nest at most %d levels deep", maxNesting)
			}
			g.pos++
			list := []Value{}
			// A list of plain ids, such as a children list, is kept as
			// strings rather than one boxed value per id. They are
			// gathered in scratch space and copied out at their final
			// length; a nested list starts only once this list is no
			// longer plain, so the scratch space is free by then.
			ids := g.idBuf[:0]
			plain := true
			for {
				n := g.peek()
				if n == nil {
					return nil, errAt("syntax", g.endCol(), "missing ]")
				}
				if n.isPunct(']') {
					g.pos++
					if plain && len(ids) > 0 {
						g.idBuf = ids
						return append(refList(nil), ids...), nil
					}
					return list, nil
				}
				if plain && n.kind == tokIdent && !isLiteralWord(g.text(n)) &&
					!(g.pos+1 < len(g.toks) && g.toks[g.pos+1].isPunct('(')) {
					g.pos++
					ids = append(ids, g.text(n))
				} else {
					if plain {
						plain = false
						for _, id := range ids {
							list = append(list, ref(id))
						}
						g.idBuf = ids
					}
					v, err := g.value(depth + 1)
					if err != nil {
						return nil, err
					}
					list = append(list, v)
				}
				n = g.peek()
				switch {
				case n == nil:
					return nil, errAt("syntax", g.endCol(), "missing ]")
				case n.isPunct(','):
					g.pos++
				case n.isPunct(']'):
				default:
					return nil, errAt("syntax", int(n.col), "expected , or ]")
				}
			}
		case '{':
			if depth+1 > maxNesting {
				return nil, errAt("syntax", int(t.col), "values may nest at most %d levels deep", maxNesting)
			}
			g.pos++
			obj := &rawObject{}
			for {
				n := g.peek()
				if n == nil {
					return nil, errAt("syntax", g.endCol(), "missing }")
				}
				if n.isPunct('}') {
					g.pos++
					return obj, nil
				}
				if n.kind != tokIdent && n.kind != tokString {
					return nil, errAt("syntax", int(n.col), "expected a key")
				}
				key := g.text(n)
				g.pos++
				if c := g.peek(); c == nil || !c.isPunct(':') {
					return nil, errAt("syntax", g.colHere(), "expected : after the key")
				}
				g.pos++
				v, err := g.value(depth + 1)
				if err != nil {
					return nil, err
				}
				obj.keys = append(obj.keys, key)
				obj.vals = append(obj.vals, v)
				n = g.peek()
				switch {
				case n == nil:
					return nil, errAt("syntax", g.endCol(), "missing }")
				case n.isPunct(','):
					g.pos++
				case n.isPunct('}'):
				default:
					return nil, errAt("syntax", int(n.col), "expected , or }")
				}
			}
		}
	}
	return nil, errAt("syntax", int(t.col), "expected a value")
}

// hasCall reports whether v contains a call.
func hasCall(v Value) bool {
	switch x := v.(type) {
	case callValue:
		return true
	case []Value:
		for _, e := range x {
			if hasCall(e) {
				return true
			}
		}
	case *rawObject:
		for _, e := range x.vals {
			if hasCall(e) {
				return true
			}
		}
	}
	return false
}

func isFinite(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) }
