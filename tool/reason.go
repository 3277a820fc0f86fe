package tool

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxReason is the most characters a caller's reason for a proposal may
// have: a sentence or two for the person who decides.
const MaxReason = 500

// CodeInvalidValue is the refusal code of a value that breaks its rules.
const CodeInvalidValue = "invalid_value"

// CheckReason returns reason with surrounding space removed, or an
// invalid_value refusal when it is longer than MaxReason characters, is
// not UTF-8 or holds control characters other than line breaks and tabs.
// The text is shown to a person as written, escaped like any other text.
func CheckReason(reason string) (string, *Error) {
	reason = strings.TrimSpace(reason)
	if !utf8.ValidString(reason) {
		return "", Errorf(CodeInvalidValue, "the reason is not valid UTF-8 text")
	}
	if n := utf8.RuneCountInString(reason); n > MaxReason {
		return "", Errorf(CodeInvalidValue, "the reason has %d characters, over the %d allowed; say why in a sentence or two", n, MaxReason)
	}
	if i := strings.IndexFunc(reason, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }); i >= 0 {
		return "", &Error{Code: CodeInvalidValue, Message: fmt.Sprintf("the reason holds a control character at byte %d; send plain text", i)}
	}
	return reason, nil
}
