package run

import (
	"encoding/json"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// secretWords are the words that make a key secret. A key is split into
// words at '_', '-', '.', spaces and camelCase boundaries ("apiKey" is api,
// key; "IBANNumber" is iban, number) and compared word by word, so "pin",
// "user_pin" and "pinCode" are secret while "pinned", "spinner" and
// "interval" are not.
var secretWords = map[string]bool{
	"apikey": true, "authorization": true, "bearer": true, "card": true, "cookie": true, "cookies": true,
	"credential": true, "credentials": true, "cvc": true, "cvv": true, "iban": true, "jwt": true,
	"otp": true, "passcode": true, "passphrase": true, "passwd": true, "password": true, "passwords": true,
	"pin": true, "privatekey": true, "pwd": true, "secret": true, "secrets": true, "ssn": true,
	"token": true, "totp": true,
}

// secretPairs are two adjacent words that together make a key secret.
var secretPairs = map[[2]string]bool{
	{"api", "key"}: true, {"private", "key"}: true, {"access", "key"}: true, {"signing", "key"}: true,
	{"card", "number"}: true, {"security", "code"}: true, {"session", "key"}: true,
}

// secretSuffixes make a single word secret when it ends with one of them
// ("accesstoken", "dbpassword", "clientsecret"). Short words such as pin or
// otp match only as whole words.
var secretSuffixes = []string{"token", "secret", "password", "passwd", "apikey", "privatekey", "cardnumber"}

var (
	bearerText     = regexp.MustCompile(`(?i)\bBearer\s+[A-Za-z0-9._~+/=-]+`)
	assignText     = regexp.MustCompile(`\b([A-Za-z][A-Za-z0-9_.-]*)(\s*[:=]\s*)("[^"]*"|'[^']*'|[^\s,;&]+)`)
	redactedMarker = "[REDACTED]"
)

// keyWords splits a key into lower-case words at separators and camelCase
// boundaries.
func keyWords(k string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(k)
	for i, r := range rs {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
			continue
		case unicode.IsUpper(r) && len(cur) > 0:
			prev := rs[i-1]
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			// "apiKey" → api|Key; "IBANNumber" → IBAN|Number.
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || unicode.IsUpper(prev) && nextLower {
				flush()
			}
		}
		cur = append(cur, r)
	}
	flush()
	return words
}

// SecretKey reports whether an object key looks like it holds a secret:
// one of its words is a secret word (pin, otp, iban, card, cvv, ssn,
// secret, token, password and their spellings) or two adjacent words are a
// secret pair (api key, private key, card number, ...), or a word ends
// in token, secret, password, passwd, apikey, privatekey or cardnumber.
func SecretKey(k string) bool {
	if len(k) > 256 {
		k = k[:256]
	}
	words := keyWords(k)
	for i, w := range words {
		if secretWords[w] {
			return true
		}
		for _, suf := range secretSuffixes {
			if strings.HasSuffix(w, suf) {
				return true
			}
		}
		if i > 0 && secretPairs[[2]string{words[i-1], w}] {
			return true
		}
	}
	return false
}

// RedactText masks bearer tokens and key=value / key: value pairs whose key
// looks secret.
func RedactText(s string) string {
	s = bearerText.ReplaceAllString(s, "Bearer "+redactedMarker)
	return assignText.ReplaceAllStringFunc(s, func(m string) string {
		g := assignText.FindStringSubmatch(m)
		if !SecretKey(g[1]) {
			return m
		}
		return g[1] + g[2] + redactedMarker
	})
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

// redactJSON redacts a JSON value and bounds its encoding to limit
// characters, replacing a longer one with {preview, truncated:true}.
func redactJSON(raw json.RawMessage, limit int) any {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "[UNSERIALIZABLE]"
	}
	v = Redact(v)
	b, _ := json.Marshal(v)
	if utf8.RuneCount(b) > limit {
		return map[string]any{"preview": cut(string(b), limit), "truncated": true}
	}
	return v
}

// cut bounds s to limit characters.
func cut(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	r := []rune(s)
	return string(r[:limit])
}
