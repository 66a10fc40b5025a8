package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
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

// InvalidField returns the invalid_request error of a handler that found
// field wrong, in the words a decoding error would use.
func InvalidField(field, format string, args ...any) *Error {
	return Errorf(CodeInvalidRequest, "field %q: %s", field, fmt.Sprintf(format, args...))
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
	Caller             *Caller         `json:"caller"`
}

// DecodeClientFrame strictly decodes one line from a client: a hello or a
// request, whose input is checked later against its operation (see
// DecodeInput). Any error it returns is a protocol violation.
func DecodeClientFrame(line []byte) (ClientFrame, error) {
	if req, ok := fastRequest(line); ok {
		return ClientFrame{Request: req}, nil
	}
	var env clientEnvelope
	if err := decodeStrict(line, &env, ""); err != nil {
		return ClientFrame{}, err
	}
	if env.Kind != nil {
		if *env.Kind != KindHello {
			return ClientFrame{}, FieldError("kind", "unknown frame kind %q", *env.Kind)
		}
		if f := firstSet([]string{"requestId", "operation", "input", "caller"},
			env.RequestID != nil, env.Operation != nil, env.Input != nil, env.Caller != nil); f != "" {
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
	return ClientFrame{Request: &Request{RequestID: *env.RequestID, Operation: *env.Operation, Input: in, Caller: env.Caller}}, nil
}

// fastRequest decodes the common request frame — exactly requestId,
// operation and an object input, the two names plain ASCII — in one scan.
// Anything else takes the general path, which also names what is wrong.
func fastRequest(line []byte) (*Request, bool) {
	b := line
	if len(b) == 0 || b[0] != '{' {
		return nil, false
	}
	var id, op, input []byte
	i := skipSpace(b, 1)
	for {
		if i >= len(b) || b[i] != '"' {
			return nil, false
		}
		end := scanString(b, i)
		if end < 0 {
			return nil, false
		}
		key := b[i+1 : end-1]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = skipSpace(b, i+1)
		vend := scanValue(b, i, 1)
		if vend < 0 {
			return nil, false
		}
		val := b[i:vend]
		switch string(key) {
		case "requestId":
			if id != nil || !plainString(val) {
				return nil, false
			}
			id = val[1 : len(val)-1]
		case "operation":
			if op != nil || !plainString(val) {
				return nil, false
			}
			op = val[1 : len(val)-1]
		case "input":
			if input != nil || val[0] != '{' || !utf8.Valid(val) {
				return nil, false
			}
			input = val
		default:
			return nil, false
		}
		i = skipSpace(b, vend)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i >= len(b) || b[i] != '}' || skipSpace(b, i+1) != len(b) {
			return nil, false
		}
		break
	}
	if len(id) == 0 || len(id) > MaxRequestIDBytes || len(op) == 0 || input == nil {
		return nil, false
	}
	return &Request{RequestID: string(id), Operation: string(op), Input: append(json.RawMessage(nil), input...)}, true
}

// plainString reports whether lit is a string literal of printable ASCII
// without escapes, so its bytes are its value.
func plainString(lit []byte) bool {
	if len(lit) < 2 || lit[0] != '"' {
		return false
	}
	for _, c := range lit[1 : len(lit)-1] {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
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
	// An empty input leaves v as it is: nothing to decode.
	if len(raw) == 0 || string(raw) == "{}" {
		if val, ok := v.(Validator); ok {
			return val.Validate()
		}
		return nil
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

// decodeStrict decodes one JSON object into v, refusing unknown fields
// (names match exactly, not case-insensitively), duplicate keys, wrong
// types and trailing data, naming the field under prefix.
//
// encoding/json/v2 refuses the same things by its own options, but in Go
// 1.26 it is built only under GOEXPERIMENT=jsonv2, which a plain
// `go build` of a clone does not set; until it is the standard library's
// by default, the key check is this package's one scanner (scan.go) in
// front of encoding/json.
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
	// The walk over the object's keys finds where it ends, for the check
	// of what follows it.
	end, err := checkKeys(trimmed, reflect.TypeOf(v), prefix)
	if err != nil {
		return err
	}
	if end < 0 {
		// Not JSON: encoding/json says what is wrong. The scan takes what
		// encoding/json takes, so it refuses too; should it not, the
		// object is refused all the same, its keys unchecked.
		if err := json.Unmarshal(data, v); err != nil {
			return translate(err, prefix)
		}
		return &DecodeError{Field: prefix, Reason: "is not valid JSON"}
	}
	if skipSpace(trimmed, end) != len(trimmed) {
		return &DecodeError{Field: prefix, Reason: "has trailing data after the JSON object"}
	}
	if err := json.Unmarshal(data, v); err != nil {
		return translate(err, prefix)
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
		return &DecodeError{Field: join(prefix, typeErr.Field), Reason: fmt.Sprintf("must be %s, not %s", jsonKind(typeErr.Type), jsonValue(typeErr.Value))}
	case errors.As(err, &syntaxErr) && syntaxErr.Error() == "unexpected end of JSON input",
		errors.Is(err, io.ErrUnexpectedEOF):
		return &DecodeError{Field: prefix, Reason: "is truncated JSON"}
	case errors.As(err, &syntaxErr):
		return &DecodeError{Field: prefix, Reason: "is not valid JSON: " + syntaxErr.Error()}
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return &DecodeError{Field: join(prefix, strings.Trim(f, `"`)), Reason: "is not a known field"}
	}
	return &DecodeError{Field: prefix, Reason: strings.TrimPrefix(msg, "json: ")}
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "a JSON value"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "a non-negative integer"
	}
	return "a number"
}

// jsonValue names the JSON value encoding/json found ("string", "number",
// "number 1.5" for a number the Go type cannot hold), saying "boolean"
// where encoding/json says "bool".
func jsonValue(v string) string {
	if v == "bool" {
		return "boolean"
	}
	return v
}

// checkKeys walks the JSON object that starts data against the Go type t
// decodes it into and returns a *DecodeError for the first key that names
// no field of its object exactly or appears twice in one object.
// encoding/json alone matches keys case-insensitively, keeps the last of
// duplicate keys, and names an unknown key without the path of the object
// holding it. Otherwise it returns where the object ends, having checked
// it is valid JSON, or -1 when it is not: malformed JSON ends the walk
// quietly, and the decoder reports it.
//
// The walk finds where values end with the package's scan and follows only
// values whose Go type has keys to check, so it costs little beside the
// decode and never recurses deeper than the Go type nests.
func checkKeys(data []byte, t reflect.Type, prefix string) (end int, err error) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil {
		if ti := infoOf(t); !ti.opaque && (ti.kind == reflect.Struct || ti.kind == reflect.Map) {
			return walkObject(data, ti, prefix)
		}
	}
	return scanValue(data, 0, 0), nil
}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[interface{ UnmarshalText([]byte) error }]()
)

// typeInfo is what the walk needs of a Go type, computed once per type.
type typeInfo struct {
	opaque bool                    // values of the type are not walked
	fields map[string]reflect.Type // a struct's JSON fields
	elem   reflect.Type            // a map's, slice's or array's elements
	kind   reflect.Kind
}

var typeInfos sync.Map // reflect.Type → *typeInfo

func infoOf(t reflect.Type) *typeInfo {
	if v, ok := typeInfos.Load(t); ok {
		return v.(*typeInfo)
	}
	ti := &typeInfo{kind: t.Kind()}
	p := reflect.PointerTo(t)
	ti.opaque = t.Kind() == reflect.Interface ||
		t.Implements(jsonUnmarshalerType) || p.Implements(jsonUnmarshalerType) ||
		t.Implements(textUnmarshalerType) || p.Implements(textUnmarshalerType)
	switch t.Kind() {
	case reflect.Struct:
		ti.fields = jsonFields(t)
	case reflect.Map, reflect.Slice, reflect.Array:
		ti.elem = t.Elem()
	}
	typeInfos.Store(t, ti)
	return ti
}

// walk checks the keys of the JSON value b against t (nil: check nothing).
func walk(b []byte, t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return nil
	}
	ti := infoOf(t)
	if ti.opaque {
		return nil
	}
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return nil
	}
	switch {
	case b[0] == '{' && (ti.kind == reflect.Struct || ti.kind == reflect.Map):
		_, err := walkObject(b, ti, path)
		return err
	case b[0] == '[' && (ti.kind == reflect.Slice || ti.kind == reflect.Array):
		i := skipSpace(b, 1)
		if i < len(b) && b[i] == ']' {
			return nil
		}
		for i < len(b) {
			end := scanValue(b, i, 0)
			if end < 0 {
				return nil
			}
			if err := walk(b[i:end], ti.elem, path); err != nil {
				return err
			}
			i = skipSpace(b, end)
			if i >= len(b) || b[i] != ',' {
				return nil
			}
			i = skipSpace(b, i+1)
		}
	}
	return nil
}

// walkObject checks the keys of the JSON object that starts b and returns
// the index after it, or -1 when it is malformed.
func walkObject(b []byte, ti *typeInfo, path string) (int, error) {
	var seen map[string]bool
	i := skipSpace(b, 1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for i < len(b) && b[i] == '"' {
		end := scanString(b, i)
		if end < 0 {
			return -1, nil
		}
		key := unquote(b[i:end])
		field := join(path, key)
		if seen[key] {
			return -1, &DecodeError{Field: field, Reason: "appears more than once"}
		}
		if seen == nil {
			seen = make(map[string]bool, 8)
		}
		seen[key] = true
		vt := ti.elem
		if ti.fields != nil {
			ft, ok := ti.fields[key]
			if !ok {
				return -1, &DecodeError{Field: field, Reason: "is not a known field"}
			}
			vt = ft
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return -1, nil
		}
		i = skipSpace(b, i+1)
		vend := scanValue(b, i, 0)
		if vend < 0 {
			return -1, nil
		}
		if err := walk(b[i:vend], vt, field); err != nil {
			return -1, err
		}
		i = skipSpace(b, vend)
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		if i >= len(b) || b[i] != ',' {
			return -1, nil
		}
		i = skipSpace(b, i+1)
	}
	return -1, nil
}

// unquote returns the string the valid JSON string literal lit holds.
func unquote(lit []byte) string {
	inner := lit[1 : len(lit)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner)
	}
	return string(appendUnquoted(nil, inner))
}

// jsonFields maps the JSON names of struct t's fields, the promoted fields
// of embedded structs included, to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := make(map[string]reflect.Type)
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				embedded = append(embedded, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	for _, et := range embedded { // an outer field hides a promoted one
		for name, ft := range jsonFields(et) {
			if _, ok := fields[name]; !ok {
				fields[name] = ft
			}
		}
	}
	return fields
}

// HostFrame is a decoded host frame: Kind is empty for a Response.
type HostFrame struct {
	Kind string
	// Pushed is a pushed frame's header (its Kind included).
	Pushed   Pushed
	Response *Response
	// Raw is the whole frame, for decoding a kinded frame into its type.
	Raw []byte
}

// DecodeHostFrame decodes one line from a host. It is lenient about
// unknown fields, so newer hosts can add them. It decodes only the
// frame's head; Raw holds the rest.
func DecodeHostFrame(line []byte) (HostFrame, error) {
	trimmed := bytes.TrimLeft(line, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return HostFrame{}, ErrNotObject
	}
	var head hostHead
	if !head.scan(line) {
		head = hostHead{}
		if err := json.Unmarshal(line, &head); err != nil {
			return HostFrame{}, translate(err, "")
		}
	}
	if head.Kind != "" {
		return HostFrame{Kind: head.Kind, Raw: line, Pushed: head.Pushed}, nil
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

// hostHead is what DecodeHostFrame reads of a frame.
type hostHead struct {
	Pushed
	RequestID string          `json:"requestId"`
	Operation string          `json:"operation"`
	OK        bool            `json:"ok"`
	Result    json.RawMessage `json:"result"`
	Error     *Error          `json:"error"`
}

// scan decodes the head as json.Unmarshal would, in one pass that leaves
// the frame's other fields undecoded; false: decode it with
// json.Unmarshal, which also says what is wrong.
func (h *hostHead) scan(line []byte) bool {
	return scanObject(line, func(key, val []byte) bool {
		if known, ok := h.Pushed.scanMember(key, val); known {
			return ok
		}
		switch {
		case keyIs(key, "requestId"):
			return scanStringField(val, &h.RequestID)
		case keyIs(key, "operation"):
			return scanStringField(val, &h.Operation)
		case keyIs(key, "ok"):
			return scanBoolField(val, &h.OK)
		case keyIs(key, "result"):
			h.Result = append(json.RawMessage(nil), val...)
		case keyIs(key, "error"):
			return json.Unmarshal(val, &h.Error) == nil
		}
		return true
	})
}
