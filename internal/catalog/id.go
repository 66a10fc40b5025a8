package catalog

import (
	"crypto/rand"
	"encoding/base32"
)

// IDLen is the length of an id the catalog allocates.
const IDLen = 10

// MaxIDLen is the length of the longest id a caller may choose.
const MaxIDLen = 64

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newID returns IDLen characters of lowercase base32 (50 random bits).
func newID() string {
	var b [7]byte // 56 bits, 12 characters; the first IDLen are kept
	rand.Read(b[:])
	return idEncoding.EncodeToString(b[:])[:IDLen]
}

// ValidID reports whether id may name a session: 1 to 64 characters of
// [a-z0-9_-], starting with a letter or digit. The error is an
// *InvalidError for field "id".
func ValidID(id string) error { return validID(id) }

func validID(id string) error {
	if id == "" {
		return invalid("id", "must not be empty")
	}
	if len(id) > MaxIDLen {
		return invalid("id", "must be at most %d characters", MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case (c == '-' || c == '_') && i > 0:
		default:
			return invalid("id", "%q must be lowercase letters, digits, '-' and '_', starting with a letter or digit", id)
		}
	}
	return nil
}
