package screen

import "unicode/utf8"

func decodeRune(s string) (rune, int) {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return utf8.RuneError, 1
	}
	return r, n
}

func firstRune(s string) rune {
	r, _ := decodeRune(s)
	return r
}
