package run

import (
	"encoding/json"
	"regexp"
	"unicode/utf8"
)

var (
	secretKey      = regexp.MustCompile(`(?i)((^|[_-])(api[-_]?key|authorization|cookie|credential|password|private[-_]?key|secret|secret[-_]?access[-_]?key|token)$|^(access|refresh|auth|api)Token$|^(clientSecret|privateKey|secretAccessKey)$)`)
	bearerText     = regexp.MustCompile(`(?i)\bBearer\s+[A-Za-z0-9._~+/=-]+`)
	secretAssign   = regexp.MustCompile(`(?i)\b((?:[A-Za-z0-9]+[_-])*(?:api[-_]?key|authorization|cookie|credential|password|private[-_]?key|secret|token))(\s*[:=]\s*)("[^"]*"|'[^']*'|[^\s,;&]+)`)
	redactedMarker = "[REDACTED]"
)

// SecretKey reports whether an object key looks like it holds a secret.
func SecretKey(k string) bool { return secretKey.MatchString(k) }

// RedactText masks bearer tokens and key=value / key: value pairs whose key
// looks secret.
func RedactText(s string) string {
	s = bearerText.ReplaceAllString(s, "Bearer "+redactedMarker)
	return secretAssign.ReplaceAllString(s, "${1}${2}"+redactedMarker)
}

// Redact returns v with the values of secret-looking keys replaced and
// strings masked.
func Redact(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			if SecretKey(k) {
				out[k] = redactedMarker
			} else {
				out[k] = Redact(x)
			}
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = Redact(x)
		}
		return out
	case string:
		return RedactText(t)
	}
	return v
}

// redactJSON redacts a JSON value and bounds its encoding to max
// characters, replacing a longer one with {preview, truncated:true}.
func redactJSON(raw json.RawMessage, max int) any {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "[UNSERIALIZABLE]"
	}
	v = Redact(v)
	b, _ := json.Marshal(v)
	if utf8.RuneCount(b) > max {
		return map[string]any{"preview": cut(string(b), max), "truncated": true}
	}
	return v
}

// cut bounds s to max characters.
func cut(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max])
}
