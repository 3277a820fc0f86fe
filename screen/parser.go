package screen

import (
	"fmt"
	"strings"
)

// Parser reads one stream incrementally. Write bytes as they arrive, then
// call End. The zero Parser reads with zero Options; NewParser sets them. A
// Parser is not safe for concurrent use.
type Parser struct {
	reg   *registry
	lr    lineReader
	g     grammar
	doc   *Document
	ended bool
}

// NewParser returns a parser for one stream, checking it against what opts
// allows.
func NewParser(opts Options) *Parser {
	p := &Parser{}
	p.init(opts)
	return p
}

func (p *Parser) init(opts Options) {
	p.reg = newRegistry(opts)
	p.doc = &Document{idx: newIndex(p.reg.maxComp, p.reg.maxState)}
	p.lr.init(maxLineLength, p.handleLine, p.overflow)
}

// Parse reads a whole stream and ends it.
func Parse(stream string, opts Options) *Document {
	p := NewParser(opts)
	_, _ = p.WriteString(stream)
	return p.End()
}

// Write feeds the next bytes of the stream, in any chunking. It returns
// ErrEnded after End; otherwise it consumes all of b.
func (p *Parser) Write(b []byte) (int, error) {
	if p.doc == nil {
		p.init(Options{})
	}
	if p.ended {
		return 0, ErrEnded
	}
	p.lr.write(b)
	return len(b), nil
}

// WriteString is Write for a string.
func (p *Parser) WriteString(s string) (int, error) {
	if p.doc == nil {
		p.init(Options{})
	}
	if p.ended {
		return 0, ErrEnded
	}
	// The line reader only reads the bytes; converting here costs a copy,
	// which is cheap next to checking the lines.
	p.lr.write([]byte(s))
	return len(s), nil
}

// End processes the last line, runs the end-of-stream checks and marks
// pending references missing. It returns the document; calling End again
// returns the same document.
func (p *Parser) End() *Document {
	if p.doc == nil {
		p.init(Options{})
	}
	if p.ended {
		return p.doc
	}
	p.lr.end()
	p.ended = true
	issues, missing := p.doc.idx.endIssues()
	p.doc.issues = append(p.doc.issues, issues...)
	if missing == nil {
		missing = []string{}
	}
	p.doc.missing = missing
	p.doc.ended = true
	return p.doc
}

// Document returns the document as read so far.
func (p *Parser) Document() *Document {
	if p.doc == nil {
		p.init(Options{})
	}
	return p.doc
}

func (p *Parser) issue(line int, code, id, msg string) {
	info := issueTable[code]
	p.doc.issues = append(p.doc.issues, Issue{Line: line, Code: code, Message: msg, Severity: info.severity, ID: id})
}

func (p *Parser) overflow(line int) {
	p.issue(line, "line_too_long", "", fmt.Sprintf("the line is longer than %d characters and was skipped; split long text or shorten it", maxLineLength))
}

func (p *Parser) handleLine(line int, text string) {
	if line == 1 && isNewerMarker(text) {
		p.doc.newer = true
		p.issue(1, "newer_version", "", "this screen was written for a newer stream format than "+catalogFormat+"; parts of it may not be shown")
	}
	if isBlank(text) {
		return
	}
	s, id, errs := p.checkLine(text, line)
	for _, w := range p.g.warnings {
		if errs == nil || errs.code != "syntax" && errs.code != "unterminated_string" {
			p.issue(line, "unknown_escape", id, w)
		}
	}
	if errs != nil {
		p.issue(line, errs.code, id, errs.msg)
		return
	}
	if di := p.doc.idx.check(s); di != nil {
		p.issue(line, di.code, id, di.msg)
		return
	}
	p.doc.idx.add(s)
	if s.kind == stmtComponent {
		p.doc.nodesAdded()
	}
}

// checkLine applies the grammar and the statement checks to one line.
func (p *Parser) checkLine(text string, line int) (*stmt, string, *lineError) {
	raw, err := p.g.parseLine(text)
	if err != nil {
		return nil, raw.target, err
	}
	s, err := p.reg.statement(&raw, line)
	if err != nil {
		return nil, raw.target, err
	}
	return s, raw.target, nil
}

// isNewerMarker reports whether line is a version marker ([3.9]) naming a
// newer format than the catalog's.
func isNewerMarker(line string) bool {
	i := skipSpaceTab(line, 0)
	if i >= len(line) || line[i] != '#' {
		return false
	}
	i = skipSpaceTab(line, i+1)
	if !strings.HasPrefix(line[i:], "omni-ir") {
		return false
	}
	i += len("omni-ir")
	j := skipSpaceTab(line, i)
	if j == i {
		return false
	}
	major, j := digits(line, j)
	if major == "" || j >= len(line) || line[j] != '.' {
		return false
	}
	minor, j := digits(line, j+1)
	if minor == "" || skipSpaceTab(line, j) != len(line) {
		return false
	}
	return compareVersion(major, minor, catalogFormat) > 0
}

func skipSpaceTab(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

func digits(s string, i int) (string, int) {
	j := i
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	return s[i:j], j
}

// compareVersion compares MAJOR.MINOR (digit strings of any length) with a
// format such as "0.8", after reading 0.6 and 0.7 as 0.5.
func compareVersion(major, minor, format string) int {
	major, minor = trimZeros(major), trimZeros(minor)
	if major == "0" && (minor == "6" || minor == "7") {
		minor = "5"
	}
	fm, fn, _ := strings.Cut(format, ".")
	if c := compareDigits(major, fm); c != 0 {
		return c
	}
	return compareDigits(minor, trimZeros(fn))
}

func trimZeros(s string) string {
	s = strings.TrimLeft(s, "0")
	if s == "" {
		return "0"
	}
	return s
}

func compareDigits(a, b string) int {
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}
