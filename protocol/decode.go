package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// DecodeError says what is wrong with a frame or an input, naming the field.
type DecodeError struct {
	// Field is the path of the offending field ("requestId",
	// "input.turnId"); empty when the frame as a whole is wrong.
	Field  string
	Reason string
}

func (e *DecodeError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return fmt.Sprintf("field %q: %s", e.Field, e.Reason)
}

// FieldError returns a *DecodeError for field.
func FieldError(field, format string, args ...any) error {
	return &DecodeError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

func requireString(field, v string) error {
	if v == "" {
		return FieldError(field, "is required")
	}
	return nil
}

// Validator is implemented by inputs that check themselves after decoding.
type Validator interface {
	Validate() error
}

// ErrNotObject is returned for a message that is not a JSON object.
var ErrNotObject = errors.New("message is not a JSON object")

// ClientFrame is a decoded client frame: exactly one of Hello and Request is set.
type ClientFrame struct {
	Hello   *Hello
	Request *Request
}

// clientEnvelope is the union of every client frame's fields, so one strict
// decode finds unknown fields; presence is checked per kind afterwards.
type clientEnvelope struct {
	Kind               *string         `json:"kind"`
	RequestID          *string         `json:"requestId"`
	Operation          *string         `json:"operation"`
	Input              json.RawMessage `json:"input"`
	ClientInstanceID   *string         `json:"clientInstanceId"`
	ProtocolMin        *int            `json:"protocolMin"`
	ProtocolMax        *int            `json:"protocolMax"`
	CompatibilityEpoch *int            `json:"compatibilityEpoch"`
	CompositionID      *string         `json:"compositionId"`
	Surface            *string         `json:"surface"`
}

// DecodeClientFrame strictly decodes one line from a client. Any error is a
// protocol violation except one wrapped around *DecodeError of a request's
// input, which the host answers instead.
func DecodeClientFrame(line []byte) (ClientFrame, error) {
	var env clientEnvelope
	if err := decodeStrict(line, &env, ""); err != nil {
		return ClientFrame{}, err
	}
	if env.Kind != nil {
		if *env.Kind != KindHello {
			return ClientFrame{}, FieldError("kind", "unknown frame kind %q", *env.Kind)
		}
		if f := firstSet([]string{"requestId", "operation", "input"},
			env.RequestID != nil, env.Operation != nil, env.Input != nil); f != "" {
			return ClientFrame{}, FieldError(f, "not allowed in a hello frame")
		}
		h := &Hello{Kind: KindHello}
		switch {
		case env.ClientInstanceID == nil || *env.ClientInstanceID == "":
			return ClientFrame{}, FieldError("clientInstanceId", "is required")
		case env.ProtocolMin == nil:
			return ClientFrame{}, FieldError("protocolMin", "is required")
		case env.ProtocolMax == nil:
			return ClientFrame{}, FieldError("protocolMax", "is required")
		case *env.ProtocolMax < *env.ProtocolMin:
			return ClientFrame{}, FieldError("protocolMax", "is below protocolMin")
		case env.CompatibilityEpoch == nil:
			return ClientFrame{}, FieldError("compatibilityEpoch", "is required")
		case env.CompositionID == nil || *env.CompositionID == "":
			return ClientFrame{}, FieldError("compositionId", "is required")
		}
		h.ClientInstanceID = *env.ClientInstanceID
		h.ProtocolMin, h.ProtocolMax = *env.ProtocolMin, *env.ProtocolMax
		h.CompatibilityEpoch = *env.CompatibilityEpoch
		h.CompositionID = *env.CompositionID
		if env.Surface != nil {
			h.Surface = *env.Surface
		}
		return ClientFrame{Hello: h}, nil
	}
	if f := firstSet([]string{"clientInstanceId", "protocolMin", "protocolMax", "compatibilityEpoch", "compositionId", "surface"},
		env.ClientInstanceID != nil, env.ProtocolMin != nil, env.ProtocolMax != nil,
		env.CompatibilityEpoch != nil, env.CompositionID != nil, env.Surface != nil); f != "" {
		return ClientFrame{}, FieldError(f, "not allowed in a request frame")
	}
	if env.RequestID == nil || *env.RequestID == "" {
		return ClientFrame{}, FieldError("requestId", "is required")
	}
	if len(*env.RequestID) > MaxRequestIDBytes {
		return ClientFrame{}, FieldError("requestId", "is longer than %d bytes", MaxRequestIDBytes)
	}
	if env.Operation == nil || *env.Operation == "" {
		return ClientFrame{}, FieldError("operation", "is required")
	}
	in := env.Input
	if len(in) == 0 || bytes.Equal(in, []byte("null")) {
		in = json.RawMessage("{}")
	}
	return ClientFrame{Request: &Request{RequestID: *env.RequestID, Operation: *env.Operation, Input: in}}, nil
}

func firstSet(names []string, set ...bool) string {
	for i, s := range set {
		if s {
			return names[i]
		}
	}
	return ""
}

// DecodeInput strictly decodes a request's input into v (a pointer) and
// validates it. Errors are *DecodeError naming the field under "input".
func DecodeInput(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := decodeStrict(raw, v, "input"); err != nil {
		var de *DecodeError
		if errors.As(err, &de) && de.Field == "" {
			de.Field = "input"
		}
		return err
	}
	if val, ok := v.(Validator); ok {
		return val.Validate()
	}
	return nil
}

// decodeStrict decodes one JSON object into v, refusing unknown fields,
// wrong types and trailing data, naming the field under prefix.
func decodeStrict(data []byte, v any, prefix string) error {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		if prefix != "" {
			return &DecodeError{Field: prefix, Reason: "must be a JSON object"}
		}
		return ErrNotObject
	}
	if !utf8.Valid(data) {
		return &DecodeError{Field: prefix, Reason: "is not valid UTF-8"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return translate(err, prefix)
	}
	if _, err := dec.Token(); err != io.EOF {
		return &DecodeError{Field: prefix, Reason: "has trailing data after the JSON object"}
	}
	return nil
}

func join(prefix, field string) string {
	switch {
	case prefix == "":
		return field
	case field == "":
		return prefix
	}
	return prefix + "." + field
}

func translate(err error, prefix string) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		return &DecodeError{Field: join(prefix, typeErr.Field), Reason: fmt.Sprintf("must be %s, not %s", jsonKind(typeErr.Type.Kind().String()), typeErr.Value)}
	case errors.As(err, &syntaxErr):
		return &DecodeError{Field: prefix, Reason: "is not valid JSON: " + syntaxErr.Error()}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &DecodeError{Field: prefix, Reason: "is truncated JSON"}
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return &DecodeError{Field: join(prefix, strings.Trim(f, `"`)), Reason: "is not a known field"}
	}
	return &DecodeError{Field: prefix, Reason: strings.TrimPrefix(msg, "json: ")}
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "an array"
	}
	return "a number"
}

// HostFrame is a decoded host frame: Kind is empty for a Response.
type HostFrame struct {
	Kind     string
	Response *Response
	// Raw is the whole frame, for decoding a kinded frame into its type.
	Raw []byte
}

// DecodeHostFrame decodes one line from a host. It is lenient about
// unknown fields, so newer hosts can add them.
func DecodeHostFrame(line []byte) (HostFrame, error) {
	trimmed := bytes.TrimLeft(line, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return HostFrame{}, ErrNotObject
	}
	var head struct {
		Kind      string          `json:"kind"`
		RequestID string          `json:"requestId"`
		Operation string          `json:"operation"`
		OK        bool            `json:"ok"`
		Result    json.RawMessage `json:"result"`
		Error     *Error          `json:"error"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return HostFrame{}, translate(err, "")
	}
	if head.Kind != "" {
		return HostFrame{Kind: head.Kind, Raw: line}, nil
	}
	if head.RequestID == "" {
		return HostFrame{}, FieldError("requestId", "is required in a response")
	}
	if !head.OK && head.Error == nil {
		return HostFrame{}, FieldError("error", "is required when ok is false")
	}
	return HostFrame{Response: &Response{
		RequestID: head.RequestID, Operation: head.Operation, OK: head.OK,
		Result: head.Result, Error: head.Error,
	}, Raw: line}, nil
}
