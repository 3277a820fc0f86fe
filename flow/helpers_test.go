package flow

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// readFile reads a test file, skipping the test when it is absent.
func readFile(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		if os.IsNotExist(err) {
			t.Skipf("%s is not available", name)
		}
		t.Fatal(err)
	}
	return data
}

func fullProgram(t testing.TB) []byte { return readFile(t, "testdata/full.json") }

func testInventory() *Inventory { return NewInventory("0.1.0") }

func mustLoad(t testing.TB, data []byte) *Program {
	t.Helper()
	p, err := Load(data, testInventory())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return p
}

// doc is a generic JSON document used to derive test variants.
type doc = map[string]any

func parseDoc(t testing.TB, data []byte) doc {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m doc
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// variant parses data, applies fn and re-encodes compactly.
func variant(t testing.TB, data []byte, fn func(m doc)) []byte {
	t.Helper()
	m := parseDoc(t, data)
	fn(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// get walks a path like "transitions.1.source_phases".
func get(m doc, p string) any {
	var cur any = m
	for _, part := range strings.Split(p, ".") {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[part]
		case []any:
			i, _ := strconv.Atoi(part)
			cur = c[i]
		}
	}
	return cur
}

// set assigns v at path p.
func set(m doc, p string, v any) {
	i := strings.LastIndexByte(p, '.')
	var parent any = m
	last := p
	if i >= 0 {
		parent, last = get(m, p[:i]), p[i+1:]
	}
	switch c := parent.(type) {
	case map[string]any:
		c[last] = v
	case []any:
		n, _ := strconv.Atoi(last)
		c[n] = v
	}
}

func del(m doc, p string) {
	i := strings.LastIndexByte(p, '.')
	parent, last := any(m), p
	if i >= 0 {
		parent, last = get(m, p[:i]), p[i+1:]
	}
	delete(parent.(map[string]any), last)
}

func reverse(m doc, p string) {
	l := slices.Clone(get(m, p).([]any))
	slices.Reverse(l)
	set(m, p, l)
}

// encodeReversed writes v with every object's keys in reverse order and
// with indentation, to show that neither matters.
func encodeReversed(v any, indent string, b *bytes.Buffer) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Sort(sort.Reverse(sort.StringSlice(keys)))
		b.WriteString("{\n")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(",\n")
			}
			b.WriteString(indent + "  ")
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteString(" :\t")
			encodeReversed(x[k], indent+"  ", b)
		}
		b.WriteString("\n" + indent + "}")
	case []any:
		b.WriteString("[ ")
		for i, e := range x {
			if i > 0 {
				b.WriteString(" , ")
			}
			encodeReversed(e, indent, b)
		}
		b.WriteString(" ]")
	default:
		vb, _ := json.Marshal(x)
		b.Write(vb)
	}
}

func osReadFile(name string) ([]byte, error) { return os.ReadFile(name) }
