package protocol

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// This file holds the package's one JSON scanner. It reads one JSON
// value, checking its shape exactly as encoding/json does but decoding
// none of it, and returns where the value ends. Two things are built on
// it: the strict decode's walk over a client's object (decode.go), which
// finds where each member's value ends, and the one-pass decoders of a
// frame's head: a frame's kind, subscription, sequence, or a response's
// id, are a few short fields beside what the frame carries, which can be
// most of a megabyte (a PTY's output, a transcript page), so a decoder
// takes the fields it needs and leaves the rest as the bytes they arrived
// as.
//
// A head decoder is a fast path: where it meets anything it does not
// decode exactly as encoding/json would (a value of the wrong type, an
// escaped or non-ASCII key), it gives up, and its caller decodes with
// encoding/json, which also names what is wrong.

// maxScanDepth is encoding/json's bound on nesting, objects and arrays
// counted together, so the scan takes exactly the values json.Valid
// takes. Nesting is counted, not recursed into: a message nested as deep
// as its size allows costs the scan no stack.
const maxScanDepth = 10000

// scanObject calls member with the key (without its quotes) and the value
// of each member of the JSON object b, in order, and reports whether b is
// one valid JSON object, with whitespace at most around it, whose keys
// are plain ASCII, and member accepted every member.
func scanObject(b []byte, member func(key, val []byte) bool) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipSpace(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return false
		}
		kend := scanString(b, i)
		if kend < 0 || !plainKey(b[i+1:kend-1]) {
			return false
		}
		key := b[i+1 : kend-1]
		i = skipSpace(b, kend)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		vend := scanValue(b, i, 1)
		if vend < 0 || !member(key, b[i:vend]) {
			return false
		}
		i = skipSpace(b, vend)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return skipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

// plainKey reports whether a key's bytes are printable ASCII without
// escapes: its bytes are then its name.
func plainKey(k []byte) bool {
	for _, c := range k {
		if c >= 0x80 || c == '\\' {
			return false
		}
	}
	return true
}

// scanValue returns the index after the valid JSON value at b[i], or -1.
// depth is how many objects and arrays hold b[i].
func scanValue(b []byte, i, depth int) int {
	if i < len(b) && (b[i] == '{' || b[i] == '[') {
		return scanNested(b, i, depth)
	}
	return scanScalar(b, i)
}

// scanScalar returns the index after the valid string, number, boolean
// or null at b[i], or -1.
func scanScalar(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; {
	case c == '"':
		return scanString(b, i)
	case c == '-' || c >= '0' && c <= '9':
		return scanNumber(b, i)
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	}
	return -1
}

// scanNested returns the index after the valid object or array at b[i],
// or -1. The objects and arrays open inside it are kept as a stack of
// bits (set for an object), in a word's room until nesting passes 64.
func scanNested(b []byte, i, depth int) int {
	var inline [1]uint64
	stack := inline[:]
	open := 0 // objects and arrays open, the outermost at bit 0
	for {
		// b[i] starts a value: open it, or scan it whole.
		if i < len(b) && (b[i] == '{' || b[i] == '[') {
			if depth+open >= maxScanDepth {
				return -1
			}
			if open/64 == len(stack) {
				stack = append(stack, 0)
			}
			object := b[i] == '{'
			if object {
				stack[open/64] |= 1 << (open % 64)
			} else {
				stack[open/64] &^= 1 << (open % 64)
			}
			open++
			i = skipSpace(b, i+1)
			if i < len(b) && (object && b[i] == '}' || !object && b[i] == ']') {
				i++
				open--
			} else {
				if object {
					if i = scanMemberKey(b, i); i < 0 {
						return -1
					}
				}
				continue
			}
		} else if i = scanScalar(b, i); i < 0 {
			return -1
		}
		// A value ended at i: close what it ends, or go on to the next
		// element or member.
		for {
			if open == 0 {
				return i
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return -1
			}
			object := stack[(open-1)/64]&(1<<((open-1)%64)) != 0
			if b[i] == ',' {
				i = skipSpace(b, i+1)
				if object {
					if i = scanMemberKey(b, i); i < 0 {
						return -1
					}
				}
				break
			}
			if object && b[i] == '}' || !object && b[i] == ']' {
				i++
				open--
				continue
			}
			return -1
		}
	}
}

// scanMemberKey returns the index of the value of the object member
// whose key starts at b[i], past the key, the colon and the space around
// it, or -1.
func scanMemberKey(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = scanString(b, i); i < 0 {
		return -1
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipSpace(b, i+1)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// stringStop reports whether any of the eight bytes of x ends a run of
// plain string bytes: a control character, a quote or a backslash.
func stringStop(x uint64) bool {
	ctl := (x - ones*0x20) & ^x
	q := x ^ (ones * '"')
	bs := x ^ (ones * '\\')
	return (ctl|(q-ones)&^q|(bs-ones)&^bs)&highs != 0
}

// scanString returns the index after the valid string literal at b[i],
// or -1. Like encoding/json, it takes any byte but a control character
// inside, valid UTF-8 or not.
func scanString(b []byte, i int) int {
	j := i + 1
	for {
		for j+8 <= len(b) && !stringStop(binary.LittleEndian.Uint64(b[j:])) {
			j += 8
		}
		if j >= len(b) {
			return -1
		}
		switch c := b[j]; {
		case c == '"':
			return j + 1
		case c < 0x20:
			return -1
		case c == '\\':
			if j+1 >= len(b) {
				return -1
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(b) {
					return -1
				}
				for _, h := range b[j+2 : j+6] {
					if !isHex(h) {
						return -1
					}
				}
				j += 6
			default:
				return -1
			}
		default:
			j++
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// scanNumber returns the index after the valid number at b[i], or -1.
func scanNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

func scanLiteral(b []byte, i int, lit string) int {
	if !bytes.HasPrefix(b[i:], []byte(lit)) {
		return -1
	}
	return i + len(lit)
}

// keyIs reports whether key, plain ASCII, names field as encoding/json
// matches names: without regard to case.
func keyIs(key []byte, field string) bool {
	if len(key) != len(field) {
		return false
	}
	for i, c := range key {
		if f := field[i]; c != f && lower(c) != lower(f) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// The decoders of a head's values below report false for a value
// encoding/json would refuse for that field: their caller decodes with
// encoding/json then. A null leaves the field as it is, as with
// encoding/json.

func scanStringField(val []byte, dst *string) bool {
	switch {
	case val[0] == 'n':
		return true
	case val[0] != '"':
		return false
	}
	// The bytes are fresh and no one else's: the string is made of them
	// without a copy, as strings.Builder makes its string.
	if b := appendUnquoted(nil, val[1:len(val)-1]); len(b) > 0 {
		*dst = unsafe.String(&b[0], len(b))
	} else {
		*dst = ""
	}
	return true
}

// appendUnquoted appends the text of the inside of a valid JSON string
// literal, as encoding/json reads it: a byte that is not valid UTF-8, or
// an escaped surrogate that is not half of a pair, becomes U+FFFD.
func appendUnquoted(b, lit []byte) []byte {
	b = slices.Grow(b, len(lit))
	for i := 0; i < len(lit); {
		start := i
		for i+8 <= len(lit) {
			x := binary.LittleEndian.Uint64(lit[i:])
			if (x&highs != 0) || stringStop(x) {
				break
			}
			i += 8
		}
		for i < len(lit) && lit[i] < utf8.RuneSelf && lit[i] != '\\' {
			i++
		}
		b = append(b, lit[start:i]...)
		if i == len(lit) {
			break
		}
		if c := lit[i]; c != '\\' {
			r, size := utf8.DecodeRune(lit[i:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, lit[i:i+size]...)
			}
			i += size
			continue
		}
		switch e := lit[i+1]; e {
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r := hex4(lit[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				// Half of a pair: whole with the escape after it, or
				// nothing.
				pair := unicode.ReplacementChar
				if i+6 <= len(lit) && lit[i] == '\\' && lit[i+1] == 'u' {
					pair = utf16.DecodeRune(r, hex4(lit[i+2:]))
				}
				if pair != unicode.ReplacementChar {
					i += 6
				}
				r = pair
			}
			b = utf8.AppendRune(b, r)
			continue
		default: // '"', '\\', '/'
			b = append(b, e)
		}
		i += 2
	}
	return b
}

// hex4 reads four hex digits, checked already.
func hex4(h []byte) rune {
	var r rune
	for _, c := range h[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

func scanUintField(val []byte, dst *uint64) bool {
	if val[0] == 'n' {
		return true
	}
	n, err := strconv.ParseUint(string(val), 10, 64)
	if err != nil {
		return false
	}
	*dst = n
	return true
}

func scanBoolField(val []byte, dst *bool) bool {
	switch val[0] {
	case 't':
		*dst = true
	case 'f':
		*dst = false
	case 'n':
	default:
		return false
	}
	return true
}
