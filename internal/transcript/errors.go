package transcript

import (
	"errors"
	"fmt"
)

// Errors of opening a transcript.
var (
	// ErrInUse is returned by Open when another Log, in this process or
	// another, holds the transcript open for writing.
	ErrInUse = errors.New("transcript is open for writing elsewhere")
)

// Errors of appending.
var (
	// ErrDamaged is returned by Append when the transcript has a damaged
	// line before its end (see Log.Damaged). The records before the damage
	// stay readable; nothing is appended after it.
	ErrDamaged = errors.New("transcript is damaged")

	// ErrTooLarge is returned by Append when the encoded record would be
	// longer than MaxRecordBytes.
	ErrTooLarge = errors.New("record is too large")

	// ErrInvalidRecord is returned by Append when the record cannot be
	// written: it has no type, or its data does not encode as JSON.
	ErrInvalidRecord = errors.New("invalid record")
)

// Errors of reading.
var (
	// ErrBadCursor is returned by Page when the cursor does not decode, or
	// does not point at the start of a record of this transcript.
	ErrBadCursor = errors.New("bad transcript cursor")

	// ErrBadPageRequest is returned by Page when the request's direction
	// or byte bound is not valid.
	ErrBadPageRequest = errors.New("bad transcript page request")

	// ErrOutOfRange is returned by Read when from is 0 or to is below from.
	ErrOutOfRange = errors.New("sequence range out of bounds")
)

// ErrClosed is returned by any method of a Log that has been closed.
var ErrClosed = errors.New("transcript is closed")

// DamageInfo says where a transcript is damaged: the first line, before the
// last one, that is not the record expected there. The records before it
// are readable; the line and everything after it are left untouched.
type DamageInfo struct {
	// Line is the damaged line's number, counting from 1.
	Line int
	// Offset is the byte offset at which the damaged line starts; it is
	// also where the readable records end.
	Offset int64
	// Reason says what is wrong with the line.
	Reason string
}

// String describes the damage for a person.
func (d *DamageInfo) String() string {
	return fmt.Sprintf("line %d at byte %d: %s", d.Line, d.Offset, d.Reason)
}

// Tail describes a torn last line: the bytes after the last good line,
// which either end without a newline or do not parse as a record.
type Tail struct {
	// Line is the torn line's number, counting from 1.
	Line int
	// Offset is where the torn bytes start: the end of the last good line.
	Offset int64
	// Bytes is how many bytes follow Offset.
	Bytes int64
	// Reason says why the line is not a record.
	Reason string
}

// Repair describes a torn last line that Open cut off the transcript and
// the file its bytes were written to, byte for byte.
type Repair struct {
	Tail
	// SetAside is the path of the file that holds the torn bytes:
	// <path>.damaged-<yyyymmddThhmmssZ>-<n>.
	SetAside string
}

// String describes the repair for a person.
func (r Repair) String() string {
	return fmt.Sprintf("cut %d bytes of a torn last line (line %d at byte %d: %s) and kept them in %s",
		r.Bytes, r.Line, r.Offset, r.Reason, r.SetAside)
}
