package screen

import (
	"errors"
	"fmt"
	"strings"
)

// Stream format versions.
//
// The stream format (the grammar, document rules, catalog, issue codes and
// limits) has a version of its own, MAJOR.MINOR, separate from the
// specification's edition. Until 1.0 a newer format only adds to an older
// one, so a parser reads its own format and every older one. Releases 0.6
// and 0.7 of the format's reference packages wrote their release number as
// the format although they kept format 0.5, so the numbers 0.6 and 0.7 name
// format 0.5 wherever a format is read.
const (
	// FormatVersion is the stream format this package reads.
	FormatVersion = "0.8"
	// SpecVersion is the edition of the Omni IR specification that
	// describes FormatVersion.
	SpecVersion = "0.10"
	// FormatMarker is the version marker for FormatVersion, the line a
	// server writes first in every stream it sends.
	FormatMarker = "# omni-ir " + FormatVersion
)

// ErrMalformedFormat is wrapped by the errors of [ParseFormat] and
// [CompareFormats] for text that is not MAJOR.MINOR.
var ErrMalformedFormat = errors.New("malformed stream format version")

// StreamFormat is a parsed stream format version. The zero value is format
// 0.0. StreamFormats compare with [StreamFormat.Compare]; == also works, as
// each format has one representation.
type StreamFormat struct {
	// major and minor are decimal digits without leading zeros; "" is 0.
	// They may be of any length.
	major, minor string
}

// ParseFormat parses a stream format version: two whole numbers of ASCII
// digits, of any length, separated by one dot ("0.8", "1.0",
// "0.123456789012345678901234567890"). Nothing else is allowed: no sign, no
// spaces, no third number. Leading zeros don't change the number, and 0.6
// and 0.7 are read as format 0.5.
//
// The error for anything else wraps [ErrMalformedFormat].
func ParseFormat(s string) (StreamFormat, error) {
	major, minor, ok := strings.Cut(s, ".")
	if !ok || !isFormatNumber(major) || !isFormatNumber(minor) {
		return StreamFormat{}, fmt.Errorf("%w %q: write MAJOR.MINOR with two whole numbers, such as %q", ErrMalformedFormat, s, FormatVersion)
	}
	f := StreamFormat{major: strings.TrimLeft(major, "0"), minor: strings.TrimLeft(minor, "0")}
	if f.major == "" && (f.minor == "6" || f.minor == "7") {
		f.minor = "5"
	}
	return f, nil
}

func isFormatNumber(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// String returns the format as MAJOR.MINOR without leading zeros. A format
// read from "0.6" or "0.7" prints as "0.5".
func (f StreamFormat) String() string {
	return formatNumberText(f.major) + "." + formatNumberText(f.minor)
}

func formatNumberText(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

// Compare returns -1 if f is an older format than g, 0 if they are the same
// format and +1 if f is newer, comparing MAJOR and then MINOR as numbers.
func (f StreamFormat) Compare(g StreamFormat) int {
	if c := compareFormatNumbers(f.major, g.major); c != 0 {
		return c
	}
	return compareFormatNumbers(f.minor, g.minor)
}

// compareFormatNumbers compares two digit strings without leading zeros.
func compareFormatNumbers(a, b string) int {
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return strings.Compare(a, b)
}

// CompareFormats compares two stream format versions as [StreamFormat.Compare]
// does: -1 when a is older than b, 0 when they name the same format (so
// "0.6", "0.7" and "0.5" are all equal), +1 when a is newer. It returns an
// error wrapping [ErrMalformedFormat] when either is not MAJOR.MINOR.
func CompareFormats(a, b string) (int, error) {
	fa, err := ParseFormat(a)
	if err != nil {
		return 0, err
	}
	fb, err := ParseFormat(b)
	if err != nil {
		return 0, err
	}
	return fa.Compare(fb), nil
}

// CanRead reports whether a client that asked for stream format requested
// can read a stream written in format written: whether written is the same
// format as requested or an older one. A server that writes format written
// answers unsupported_version, before it streams anything, exactly when
// CanRead is false.
//
// A malformed version can't be compared, so CanRead reports false for one.
// A request that names no version at all is served whatever the server
// writes; check for that before calling CanRead.
func CanRead(requested, written string) bool {
	c, err := CompareFormats(written, requested)
	return err == nil && c <= 0
}
