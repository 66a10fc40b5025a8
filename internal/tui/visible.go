package tui

import "strings"

// Visible returns s with what a terminal would act on made visible: C0
// control characters other than newline and tab in caret notation (ESC as
// ^[, a carriage return as ^M), DEL as ^?, C1 controls as the ESC
// sequence they stand for (^[[ for CSI), and invalid UTF-8 as U+FFFD. A
// carriage return before a newline is dropped. Everything models and tools
// print passes through it before it reaches a terminal.
func Visible(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\n' && c != '\t' || c == 0x7f || c >= 0x80 {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i, r := range s {
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r == '\r' && i+1 < len(s) && s[i+1] == '\n':
		case r < 0x20:
			b.WriteByte('^')
			b.WriteByte(byte(r) + 0x40)
		case r == 0x7f:
			b.WriteString("^?")
		case r >= 0x80 && r <= 0x9f:
			b.WriteString("^[")
			b.WriteByte(byte(r - 0x40))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
