package protocol

import "fmt"

// Code is a wire error code: a small fixed set, for programs. Messages are
// for people and never carry secrets.
type Code string

// The error codes of the protocol.
const (
	CodeInvalidRequest       Code = "invalid_request"
	CodeNotFound             Code = "not_found"
	CodeSessionArchived      Code = "session_archived"
	CodeSessionAmbiguous     Code = "session_ambiguous"
	CodeOperationConflict    Code = "operation_conflict"
	CodeOperationUnavailable Code = "operation_unavailable"
	CodeHostNotReady         Code = "host_not_ready"
	CodeUnauthorized         Code = "unauthorized"
	CodeDraining             Code = "draining"
	CodeInternalFailure      Code = "internal_failure"
)

// Codes lists every error code, in documentation order.
var Codes = []Code{
	CodeInvalidRequest, CodeNotFound, CodeSessionArchived, CodeSessionAmbiguous,
	CodeOperationConflict, CodeOperationUnavailable, CodeHostNotReady,
	CodeUnauthorized, CodeDraining, CodeInternalFailure,
}

// Valid reports whether c is one of Codes.
func (c Code) Valid() bool {
	for _, k := range Codes {
		if c == k {
			return true
		}
	}
	return false
}

// Error is the error object of a failed response. It is also a Go error, so
// handlers return it and clients receive it unchanged.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Errorf returns an *Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}
