package flow

import "strconv"

// maxIdentLen bounds every id and name, in bytes.
const maxIdentLen = 128

// isID reports whether s matches ^[a-z][a-z0-9]*(?:[.-][a-z0-9]+)*$ and is at
// most 128 bytes: the grammar of program ids, transition ids, resources,
// effects, verifiers, capabilities and objectives.
func isID(s string) bool { return isIdent(s, false) }

// isName reports whether s matches ^[a-z][a-z0-9]*(?:[._-][a-z0-9]+)*$ and is
// at most 128 bytes: the grammar of phases, facets, identity claims,
// evidence, parameters, interruption points and managed operations.
func isName(s string) bool { return isIdent(s, true) }

func isIdent(s string, underscore bool) bool {
	if len(s) == 0 || len(s) > maxIdentLen || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	prevSep := false
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			prevSep = false
		case c == '.' || c == '-' || (underscore && c == '_'):
			if prevSep {
				return false
			}
			prevSep = true
		default:
			return false
		}
	}
	return !prevSep
}

// isVersionToken reports whether s matches ^[A-Za-z0-9][A-Za-z0-9._-]*$ (at
// most 128 bytes), the grammar of program_version.
func isVersionToken(s string) bool {
	if len(s) == 0 || len(s) > maxIdentLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return true
}

// semver is a MAJOR.MINOR.PATCH triple with an optional pre-release flag.
type semver struct {
	major, minor, patch uint64
	pre                 bool
}

func (v semver) less(w semver) bool {
	switch {
	case v.major != w.major:
		return v.major < w.major
	case v.minor != w.minor:
		return v.minor < w.minor
	case v.patch != w.patch:
		return v.patch < w.patch
	}
	// A pre-release sorts before the release of the same number.
	return v.pre && !w.pre
}

// parseTriple parses (0|[1-9][0-9]*) three times separated by dots and
// returns the rest of s.
func parseTriple(s string) (semver, string, bool) {
	var v semver
	var parts [3]uint64
	for i := range parts {
		if i > 0 {
			if len(s) == 0 || s[0] != '.' {
				return v, s, false
			}
			s = s[1:]
		}
		n := 0
		for n < len(s) && s[n] >= '0' && s[n] <= '9' {
			n++
		}
		if n == 0 || (n > 1 && s[0] == '0') {
			return v, s, false
		}
		x, err := strconv.ParseUint(s[:n], 10, 64)
		if err != nil {
			return v, s, false
		}
		parts[i] = x
		s = s[n:]
	}
	v.major, v.minor, v.patch = parts[0], parts[1], parts[2]
	return v, s, true
}

// parseMinimum parses a requires_runtime value: ^>=X.Y.Z$ with no leading
// zeros.
func parseMinimum(s string) (semver, bool) {
	if len(s) < 2 || s[:2] != ">=" {
		return semver{}, false
	}
	v, rest, ok := parseTriple(s[2:])
	return v, ok && rest == ""
}

// parseRuntimeVersion parses a runtime version: an optional "v", X.Y.Z, and
// an optional "-pre-release" made of [0-9A-Za-z.-].
func parseRuntimeVersion(s string) (semver, bool) {
	if len(s) > 0 && s[0] == 'v' {
		s = s[1:]
	}
	v, rest, ok := parseTriple(s)
	if !ok {
		return v, false
	}
	if rest == "" {
		return v, true
	}
	if rest[0] != '-' || len(rest) == 1 {
		return v, false
	}
	for i := 1; i < len(rest); i++ {
		c := rest[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '.' || c == '-') {
			return v, false
		}
	}
	v.pre = true
	return v, true
}

// ValidRuntimeVersion reports whether s is a runtime version the loader can
// compare with requires_runtime: MAJOR.MINOR.PATCH, optionally prefixed by
// "v" and followed by "-pre-release".
func ValidRuntimeVersion(s string) bool {
	_, ok := parseRuntimeVersion(s)
	return ok
}
