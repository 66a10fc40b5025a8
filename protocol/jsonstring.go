package protocol

import (
	"slices"
	"unicode/utf8"
)

// AppendJSONString appends s to b as a JSON string literal, as
// json.Marshal would but for HTML characters, which it leaves as they are:
// a byte that is not valid UTF-8 becomes U+FFFD. Runs of plain ASCII, most
// of a terminal's output, are copied eight bytes at a time.
func AppendJSONString[T ~string | ~[]byte](b []byte, s T) []byte {
	// Room for the text, its quotes, and the escapes of a line's end and
	// a few terminal sequences.
	b = slices.Grow(b, len(s)+len(s)/8+2)
	b = append(b, '"')
	start := 0 // s[start:i] is plain, not yet appended
	i := 0
	for i < len(s) {
		if i+8 <= len(s) {
			_ = s[i+7]
			x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
				uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
			if !stringStop(x) && x&highs == 0 {
				i += 8
				continue
			}
		}
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			b = appendEscape(b, c)
			i++
			start = i
			continue
		}
		r, size := decodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, `\u202`...)
			b = append(b, hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// appendEscape appends the escape of an ASCII byte a JSON string cannot
// hold as it is.
func appendEscape(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

func decodeRune[T ~string | ~[]byte](s T) (rune, int) {
	var p [utf8.UTFMax]byte
	n := copy(p[:], s[:min(len(s), utf8.UTFMax)])
	return utf8.DecodeRune(p[:n])
}
