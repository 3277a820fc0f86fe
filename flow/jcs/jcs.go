// Package jcs writes the JSON Canonicalization Scheme of RFC 8785.
//
// Canonical JSON has exactly one byte representation per value: no
// insignificant whitespace, object members sorted by the UTF-16 code units of
// their names, strings escaped minimally (only '"', '\\' and the control
// characters, the latter with the short forms \b \t \n \f \r where they exist
// and \u00xx otherwise, lowercase hex), and numbers written as ECMAScript
// would write them. Two documents that mean the same thing therefore hash the
// same.
//
// [Transform] canonicalizes any JSON document. The Append functions let a
// caller that already knows its keys in canonical order write canonical bytes
// directly, without building an intermediate value.
package jcs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s as a canonical JSON string. Invalid UTF-8 is written
// as U+FFFD; callers that must reject it check with utf8.ValidString first.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, "\uFFFD"...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendInt appends n in canonical form. Integers of magnitude above 2^53 are
// not exactly representable as IEEE 754 doubles, so they are written as the
// nearest double would be, which is what RFC 8785 requires.
func AppendInt(dst []byte, n int64) []byte {
	const exact = 1 << 53
	if n > -exact && n < exact {
		return strconv.AppendInt(dst, n, 10)
	}
	return AppendFloat(dst, float64(n))
}

// AppendFloat appends f the way ECMAScript's Number.prototype.toString
// writes it (RFC 8785 §3.2.2.3). NaN and infinities have no JSON form; they
// are written as null.
func AppendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	if f == 0 {
		return append(dst, '0')
	}
	abs := math.Abs(f)
	if abs >= 1e-6 && abs < 1e21 {
		return strconv.AppendFloat(dst, f, 'f', -1, 64)
	}
	// Exponent form: mantissa digits, then e+NN or e-NN without padding.
	b := strconv.AppendFloat(nil, f, 'e', -1, 64)
	i := bytes.IndexByte(b, 'e')
	dst = append(dst, b[:i+1]...)
	exp := b[i+1:]
	sign := exp[0]
	exp = bytes.TrimLeft(exp[1:], "0")
	dst = append(dst, sign)
	return append(dst, exp...)
}

// ErrInvalid reports a document that is not a single valid JSON value.
var ErrInvalid = errors.New("jcs: invalid JSON")

// Transform returns the canonical form of the JSON document src. It rejects
// invalid UTF-8, duplicate object member names and trailing data.
func Transform(src []byte) ([]byte, error) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(src))
	v, err := parse(dec)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if _, err := dec.ReadToken(); err == nil {
		return nil, fmt.Errorf("%w: trailing data after the value", ErrInvalid)
	} else if !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return v.append(nil), nil
}

type node struct {
	kind    byte // 'n', 't', 'f', '"', '0', '{', '['
	str     string
	num     float64
	members []member
	items   []node
}

type member struct {
	name  string
	key   []uint16
	value node
}

func parse(dec *jsontext.Decoder) (node, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return node{}, err
	}
	switch k := tok.Kind(); k {
	case 'n', 't', 'f':
		return node{kind: byte(k)}, nil
	case '"':
		return node{kind: '"', str: tok.String()}, nil
	case '0':
		f, err := tok.Float()
		if err != nil {
			return node{}, err
		}
		return node{kind: '0', num: f}, nil
	case '{':
		n := node{kind: '{'}
		for dec.PeekKind() != '}' {
			name, err := dec.ReadToken()
			if err != nil {
				return node{}, err
			}
			s := name.String()
			v, err := parse(dec)
			if err != nil {
				return node{}, err
			}
			n.members = append(n.members, member{name: s, key: utf16.Encode([]rune(s)), value: v})
		}
		if _, err := dec.ReadToken(); err != nil {
			return node{}, err
		}
		slices.SortFunc(n.members, func(a, b member) int { return slices.Compare(a.key, b.key) })
		return n, nil
	case '[':
		n := node{kind: '['}
		for dec.PeekKind() != ']' {
			v, err := parse(dec)
			if err != nil {
				return node{}, err
			}
			n.items = append(n.items, v)
		}
		if _, err := dec.ReadToken(); err != nil {
			return node{}, err
		}
		return n, nil
	default:
		return node{}, fmt.Errorf("unexpected token %v", k)
	}
}

func (n node) append(dst []byte) []byte {
	switch n.kind {
	case 'n':
		return append(dst, "null"...)
	case 't':
		return append(dst, "true"...)
	case 'f':
		return append(dst, "false"...)
	case '"':
		return AppendString(dst, n.str)
	case '0':
		return AppendFloat(dst, n.num)
	case '{':
		dst = append(dst, '{')
		for i, m := range n.members {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, m.name)
			dst = append(dst, ':')
			dst = m.value.append(dst)
		}
		return append(dst, '}')
	default:
		dst = append(dst, '[')
		for i, it := range n.items {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = it.append(dst)
		}
		return append(dst, ']')
	}
}
