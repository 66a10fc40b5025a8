package catalog

import (
	"errors"
	"fmt"
	"strings"
)

// Errors of selection.
var (
	// ErrNotFound is returned when no session has the id, or no session's id
	// starts with the selector. The error is a *NotFoundError.
	ErrNotFound = errors.New("session not found")
	// ErrAmbiguous is returned by Resolve when a selector is the prefix of
	// more than one session id and the id of none (the error is an
	// *AmbiguousError listing the candidates), or when it selects a
	// session whose id more than one folder holds (a *DuplicateError).
	ErrAmbiguous = errors.New("session selector is ambiguous")
)

// Errors of changes.
var (
	// ErrDuplicate is returned by Create when the session id it was given
	// is already in use in this home.
	ErrDuplicate = errors.New("session id already in use")
	// ErrArchived is returned when a change other than Unarchive or Remove
	// is asked of an archived session.
	ErrArchived = errors.New("session is archived")
	// ErrDamaged is returned when a change other than Remove is asked of a
	// session whose header could not be read.
	ErrDamaged = errors.New("session header is damaged")
)

// Errors of input.
var (
	// ErrInvalid is returned when an argument is not acceptable. The error
	// is an *InvalidError naming the field.
	ErrInvalid = errors.New("invalid input")
	// ErrInvalidModel is returned when a model is not written
	// "provider/model" with both parts present. It is also ErrInvalid.
	ErrInvalidModel = fmt.Errorf("%w: model", ErrInvalid)
)

// NotFoundError reports a selector or id that names no session.
type NotFoundError struct {
	Selector string
}

func (e *NotFoundError) Error() string { return fmt.Sprintf("session %q not found", e.Selector) }

// Unwrap returns ErrNotFound.
func (e *NotFoundError) Unwrap() error { return ErrNotFound }

// maxListedCandidates bounds how many candidates an AmbiguousError's message
// names; Candidates holds them all.
const maxListedCandidates = 10

// AmbiguousError reports a selector that is the prefix of several session
// ids. Candidates are in List order.
type AmbiguousError struct {
	Selector   string
	Candidates []Header
}

func (e *AmbiguousError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "session %q is ambiguous; it matches %d sessions: ", e.Selector, len(e.Candidates))
	for i, h := range e.Candidates {
		if i == maxListedCandidates {
			fmt.Fprintf(&b, ", and %d more", len(e.Candidates)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(h.ID)
		switch {
		case h.Damaged:
			b.WriteString(" (damaged)")
		default:
			fmt.Fprintf(&b, " (%s)", h.Label())
		}
	}
	return b.String()
}

// Unwrap returns ErrAmbiguous.
func (e *AmbiguousError) Unwrap() error { return ErrAmbiguous }

// DuplicateError reports a selected session whose id is held by more than
// one folder of the home: besides its own, a folder copied by hand or
// restored from a backup, whose header names the same id. Which one is
// the session is for a person to say, so neither is selected.
type DuplicateError struct {
	ID string
	// Folders are the folders under <home>/sessions that hold the id,
	// sorted; the session's own is the one named ID.
	Folders []string
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("session %q is ambiguous: %d folders of this home's sessions hold it (%s); remove the copies, or move them out of the sessions folder",
		e.ID, len(e.Folders), strings.Join(e.Folders, ", "))
}

// Unwrap returns ErrAmbiguous.
func (e *DuplicateError) Unwrap() error { return ErrAmbiguous }

// InvalidError reports an argument that is not acceptable, naming it.
type InvalidError struct {
	// Field names the argument: "id", "cwd", "title", "model", "thinking",
	// "approval", "sandbox", "network", "plugins" (or "plugins[i]"),
	// "at" or "selector".
	Field string
	// Reason says what is wrong, for a person.
	Reason string

	kind error // ErrInvalid or ErrInvalidModel
}

func (e *InvalidError) Error() string { return "the " + e.Field + " " + e.Reason }

// Unwrap returns ErrInvalidModel for a model, ErrInvalid otherwise.
func (e *InvalidError) Unwrap() error {
	if e.kind != nil {
		return e.kind
	}
	return ErrInvalid
}

func invalid(field, format string, args ...any) *InvalidError {
	return &InvalidError{Field: field, Reason: fmt.Sprintf(format, args...)}
}
