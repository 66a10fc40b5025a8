package protocol_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/protocol"
)

const validHello = `{"kind":"hello","clientInstanceId":"c1","protocolMin":1,"protocolMax":1,"compatibilityEpoch":1,"compositionId":"agentd.interactive","surface":"cli"}`

// wantDecodeError checks that err is a *DecodeError naming field, with a
// reason containing reason (when reason is not empty).
func wantDecodeError(t *testing.T, err error, field, reason string) {
	t.Helper()
	var de *protocol.DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("error = %v (%T), want a *DecodeError for field %q", err, err, field)
	}
	if de.Field != field {
		t.Errorf("DecodeError.Field = %q, want %q (error: %v)", de.Field, field, err)
	}
	if reason != "" && !strings.Contains(de.Reason, reason) {
		t.Errorf("DecodeError.Reason = %q, want it to contain %q", de.Reason, reason)
	}
}

func TestDecodeClientFrame(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		hello   *protocol.Hello
		request *protocol.Request
		// When the frame is refused: notObject for ErrNotObject, else the
		// DecodeError's field and a part of its reason.
		notObject bool
		field     string
		reason    string
	}{
		{
			name: "a valid hello is decoded",
			line: validHello,
			hello: &protocol.Hello{
				Kind: "hello", ClientInstanceID: "c1", ProtocolMin: 1, ProtocolMax: 1,
				CompatibilityEpoch: 1, CompositionID: "agentd.interactive", Surface: "cli",
			},
		},
		{
			name: "a hello without a surface is decoded",
			line: `{"kind":"hello","clientInstanceId":"c1","protocolMin":1,"protocolMax":2,"compatibilityEpoch":1,"compositionId":"x"}`,
			hello: &protocol.Hello{
				Kind: "hello", ClientInstanceID: "c1", ProtocolMin: 1, ProtocolMax: 2,
				CompatibilityEpoch: 1, CompositionID: "x",
			},
		},
		{
			name:    "a valid request is decoded with its input",
			line:    `{"requestId":"r1","operation":"turn.query","input":{"sessionId":"s","turnId":"t"}}`,
			request: &protocol.Request{RequestID: "r1", Operation: "turn.query", Input: json.RawMessage(`{"sessionId":"s","turnId":"t"}`)},
		},
		{
			name:    "a request without input gets an empty object",
			line:    `{"requestId":"r1","operation":"host.status"}`,
			request: &protocol.Request{RequestID: "r1", Operation: "host.status", Input: json.RawMessage(`{}`)},
		},
		{
			name:    "a request with a null input gets an empty object",
			line:    `{"requestId":"r1","operation":"host.status","input":null}`,
			request: &protocol.Request{RequestID: "r1", Operation: "host.status", Input: json.RawMessage(`{}`)},
		},
		{
			name:    "surrounding JSON whitespace is allowed",
			line:    " \t{\"requestId\":\"r1\",\"operation\":\"host.status\"} \r",
			request: &protocol.Request{RequestID: "r1", Operation: "host.status", Input: json.RawMessage(`{}`)},
		},
		{name: "a request without requestId is refused", line: `{"operation":"host.status"}`, field: "requestId", reason: "is required"},
		{name: "a request with an empty requestId is refused", line: `{"requestId":"","operation":"host.status"}`, field: "requestId", reason: "is required"},
		{name: "a request with a null requestId is refused", line: `{"requestId":null,"operation":"host.status"}`, field: "requestId", reason: "is required"},
		{
			name:   "a requestId over the byte limit is refused",
			line:   `{"requestId":"` + strings.Repeat("x", protocol.MaxRequestIDBytes+1) + `","operation":"host.status"}`,
			field:  "requestId",
			reason: "longer than",
		},
		{
			name:    "a requestId at the byte limit is decoded",
			line:    `{"requestId":"` + strings.Repeat("x", protocol.MaxRequestIDBytes) + `","operation":"host.status"}`,
			request: &protocol.Request{RequestID: strings.Repeat("x", protocol.MaxRequestIDBytes), Operation: "host.status", Input: json.RawMessage(`{}`)},
		},
		{name: "a request without operation is refused", line: `{"requestId":"r1"}`, field: "operation", reason: "is required"},
		{name: "a requestId of the wrong type is refused", line: `{"requestId":1,"operation":"host.status"}`, field: "requestId", reason: "must be a string, not number"},
		{name: "an unknown kind is refused", line: `{"kind":"goodbye"}`, field: "kind", reason: `unknown frame kind "goodbye"`},
		{name: "an accepted frame from a client is refused", line: `{"kind":"accepted","hostEpoch":"e"}`, field: "hostEpoch", reason: "not a known field"},
		{name: "a JSON array is not an object", line: `[{"requestId":"r1"}]`, notObject: true},
		{name: "a JSON string is not an object", line: `"hello"`, notObject: true},
		{name: "a JSON number is not an object", line: `42`, notObject: true},
		{name: "JSON null is not an object", line: `null`, notObject: true},
		{name: "an empty line is not an object", line: ``, notObject: true},
		{name: "invalid JSON is refused", line: `{"requestId" "r1"}`, field: "", reason: "is not valid JSON"},
		{name: "truncated JSON is refused", line: `{"requestId":"r1",`, field: "", reason: "truncated"},
		{name: "an unknown top-level field is named", line: `{"requestId":"r1","operation":"host.status","priority":1}`, field: "priority", reason: "is not a known field"},
		{name: "a field differing only in case is unknown", line: `{"requestID":"r1","operation":"host.status"}`, field: "requestID", reason: "is not a known field"},
		{name: "a duplicate field is refused", line: `{"requestId":"r1","requestId":"r2","operation":"host.status"}`, field: "requestId", reason: "more than once"},
		{name: "a duplicate field spelt with an escape is refused", line: `{"requestId":"r1","request\u0049d":"r2","operation":"host.status"}`, field: "requestId", reason: "more than once"},
		{name: "hello fields in a request are refused", line: `{"requestId":"r1","operation":"host.status","clientInstanceId":"c1"}`, field: "clientInstanceId", reason: "not allowed in a request frame"},
		{name: "a surface in a request is refused", line: `{"requestId":"r1","operation":"host.status","surface":"cli"}`, field: "surface", reason: "not allowed in a request frame"},
		{name: "request fields in a hello are refused", line: strings.Replace(validHello, `"kind":"hello"`, `"kind":"hello","requestId":"r1"`, 1), field: "requestId", reason: "not allowed in a hello frame"},
		{name: "an input in a hello is refused", line: strings.Replace(validHello, `"kind":"hello"`, `"kind":"hello","input":{}`, 1), field: "input", reason: "not allowed in a hello frame"},
		{name: "a hello without clientInstanceId is refused", line: `{"kind":"hello","protocolMin":1,"protocolMax":1,"compatibilityEpoch":1,"compositionId":"x"}`, field: "clientInstanceId", reason: "is required"},
		{name: "a hello without protocolMin is refused", line: `{"kind":"hello","clientInstanceId":"c","protocolMax":1,"compatibilityEpoch":1,"compositionId":"x"}`, field: "protocolMin", reason: "is required"},
		{name: "a hello without protocolMax is refused", line: `{"kind":"hello","clientInstanceId":"c","protocolMin":1,"compatibilityEpoch":1,"compositionId":"x"}`, field: "protocolMax", reason: "is required"},
		{name: "a hello without compatibilityEpoch is refused", line: `{"kind":"hello","clientInstanceId":"c","protocolMin":1,"protocolMax":1,"compositionId":"x"}`, field: "compatibilityEpoch", reason: "is required"},
		{name: "a hello without compositionId is refused", line: `{"kind":"hello","clientInstanceId":"c","protocolMin":1,"protocolMax":1,"compatibilityEpoch":1}`, field: "compositionId", reason: "is required"},
		{name: "a hello whose range is inverted is refused", line: `{"kind":"hello","clientInstanceId":"c","protocolMin":2,"protocolMax":1,"compatibilityEpoch":1,"compositionId":"x"}`, field: "protocolMax", reason: "below protocolMin"},
		{name: "a fractional protocol version is refused", line: `{"kind":"hello","clientInstanceId":"c","protocolMin":1.5,"protocolMax":2,"compatibilityEpoch":1,"compositionId":"x"}`, field: "protocolMin", reason: "must be an integer, not number 1.5"},
		{name: "a protocol version given as a string is refused", line: `{"kind":"hello","clientInstanceId":"c","protocolMin":"1","protocolMax":1,"compatibilityEpoch":1,"compositionId":"x"}`, field: "protocolMin", reason: "must be an integer, not string"},
		{name: "trailing data after the object is refused", line: `{"requestId":"r1","operation":"host.status"} {}`, field: "", reason: "trailing data"},
		{name: "a stray closing brace is trailing data", line: `{"requestId":"r1","operation":"host.status"}}`, field: "", reason: "trailing data"},
		{name: "invalid UTF-8 is refused", line: "{\"requestId\":\"r\xff1\",\"operation\":\"host.status\"}", field: "", reason: "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := protocol.DecodeClientFrame([]byte(tt.line))
			switch {
			case tt.hello != nil || tt.request != nil:
				if err != nil {
					t.Fatalf("DecodeClientFrame: %v", err)
				}
				if !reflect.DeepEqual(got.Hello, tt.hello) {
					t.Errorf("Hello = %+v, want %+v", got.Hello, tt.hello)
				}
				if !reflect.DeepEqual(got.Request, tt.request) {
					t.Errorf("Request = %+v, want %+v", got.Request, tt.request)
				}
			case tt.notObject:
				if !errors.Is(err, protocol.ErrNotObject) {
					t.Fatalf("error = %v, want ErrNotObject", err)
				}
			default:
				if got.Hello != nil || got.Request != nil {
					t.Errorf("frame = %+v alongside an error", got)
				}
				wantDecodeError(t, err, tt.field, tt.reason)
			}
		})
	}
}

func TestDecodeInput(t *testing.T) {
	tests := []struct {
		name  string
		input string
		into  func() any
		want  any // the decoded value, when decoding succeeds
		// When decoding fails: the DecodeError's field and a part of its reason.
		field  string
		reason string
	}{
		{
			name:  "a valid input is decoded",
			input: `{"sessionId":"s1","turnId":"t1"}`,
			into:  func() any { return new(protocol.TurnRef) },
			want:  &protocol.TurnRef{SessionID: "s1", TurnID: "t1"},
		},
		{
			name:  "a nested input is decoded",
			input: `{"sessionId":"s1","turnId":"t1","content":{"text":"hi"}}`,
			into:  func() any { return new(protocol.TurnStartInput) },
			want:  &protocol.TurnStartInput{SessionID: "s1", TurnID: "t1", Content: protocol.Content{Text: "hi"}},
		},
		{
			name:  "an empty input decodes to the zero value",
			input: ``,
			into:  func() any { return new(protocol.HostStatusInput) },
			want:  &protocol.HostStatusInput{},
		},
		{
			name:  "null pointers stay nil",
			input: `{"subscriptionId":"sub","direction":"older","throughSequence":null,"cursor":null,"anchorSequence":7,"maxBytes":1024}`,
			into:  func() any { return new(protocol.TranscriptPageInput) },
			want:  &protocol.TranscriptPageInput{SubscriptionID: "sub", Direction: "older", AnchorSequence: ptr(uint64(7)), MaxBytes: 1024},
		},
		{
			name:  "a session's sandbox and network are decoded",
			input: `{"cwd":"/w","sandbox":"read-only","network":"off"}`,
			into:  func() any { return new(protocol.SessionCreateInput) },
			want:  &protocol.SessionCreateInput{Cwd: "/w", Sandbox: protocol.SandboxReadOnly, Network: protocol.NetworkOff},
		},
		{
			name:   "an unknown sandbox mode is named",
			input:  `{"cwd":"/w","sandbox":"none"}`,
			into:   func() any { return new(protocol.SessionCreateInput) },
			field:  "input.sandbox",
			reason: `must be "read-only", "workspace" or "full"`,
		},
		{
			name:   "an unknown network setting is named",
			input:  `{"cwd":"/w","network":"no"}`,
			into:   func() any { return new(protocol.SessionCreateInput) },
			field:  "input.network",
			reason: `must be "on" or "off"`,
		},
		{
			name:   "the network off without a sandbox is refused",
			input:  `{"cwd":"/w","sandbox":"full","network":"off"}`,
			into:   func() any { return new(protocol.SessionCreateInput) },
			field:  "input.network",
			reason: "needs a sandbox",
		},
		{
			name:   "a string field given a number is named",
			input:  `{"sessionId":"s1","turnId":5}`,
			into:   func() any { return new(protocol.TurnRef) },
			field:  "input.turnId",
			reason: "must be a string, not number",
		},
		{
			name:   "a nested field of the wrong type is named with its path",
			input:  `{"sessionId":"s1","turnId":"t1","content":{"text":true}}`,
			into:   func() any { return new(protocol.TurnStartInput) },
			field:  "input.content.text",
			reason: "must be a string, not boolean",
		},
		{
			name:   "an object given a string is named",
			input:  `{"sessionId":"s1","turnId":"t1","content":"hi"}`,
			into:   func() any { return new(protocol.TurnStartInput) },
			field:  "input.content",
			reason: "must be an object, not string",
		},
		{
			name:   "an array given an object is named",
			input:  `{"subscriptionId":"sub","refs":{}}`,
			into:   func() any { return new(protocol.PtyInterestInput) },
			field:  "input.refs",
			reason: "must be an array, not object",
		},
		{
			name:   "a negative unsigned integer is refused",
			input:  `{"sessionId":"s","ref":"r","controllerId":"c","sequence":-1}`,
			into:   func() any { return new(protocol.ControlInput) },
			field:  "input.sequence",
			reason: "must be a non-negative integer, not number -1",
		},
		{
			name:   "an integer out of range is refused",
			input:  `{"sessionId":"s","ref":"r","controllerId":"c","sequence":1,"cols":1e99}`,
			into:   func() any { return new(protocol.ControlInput) },
			field:  "input.cols",
			reason: "must be an integer",
		},
		{
			name:   "an unknown field is named",
			input:  `{"sessionId":"s1","turnId":"t1","force":true}`,
			into:   func() any { return new(protocol.TurnRef) },
			field:  "input.force",
			reason: "is not a known field",
		},
		{
			name:   "an unknown nested field is named with its path",
			input:  `{"sessionId":"s1","turnId":"t1","content":{"text":"hi","html":"<b>hi</b>"}}`,
			into:   func() any { return new(protocol.TurnStartInput) },
			field:  "input.content.html",
			reason: "is not a known field",
		},
		{
			name:   "a field differing only in case is unknown",
			input:  `{"sessionID":"s1","turnId":"t1"}`,
			into:   func() any { return new(protocol.TurnRef) },
			field:  "input.sessionID",
			reason: "is not a known field",
		},
		{
			name:   "a duplicate field is refused",
			input:  `{"sessionId":"s1","turnId":"t1","turnId":"t2"}`,
			into:   func() any { return new(protocol.TurnRef) },
			field:  "input.turnId",
			reason: "more than once",
		},
		{
			name:   "any field of an empty input is unknown",
			input:  `{"verbose":true}`,
			into:   func() any { return new(protocol.HostStatusInput) },
			field:  "input.verbose",
			reason: "is not a known field",
		},
		{
			name:   "a missing required field is named by Validate",
			input:  `{"sessionId":"s1"}`,
			into:   func() any { return new(protocol.TurnRef) },
			field:  "input.turnId",
			reason: "is required",
		},
		{
			name:   "a missing nested required field is named by Validate",
			input:  `{"sessionId":"s1","turnId":"t1"}`,
			into:   func() any { return new(protocol.TurnStartInput) },
			field:  "input.content.text",
			reason: "is required",
		},
		{
			name:   "a value out of its set is named by Validate",
			input:  `{"subscriptionId":"sub","direction":"sideways","maxBytes":10}`,
			into:   func() any { return new(protocol.TranscriptPageInput) },
			field:  "input.direction",
			reason: `"older" or "newer"`,
		},
		{
			name:   "a negative limit is named by Validate",
			input:  `{"limit":-1}`,
			into:   func() any { return new(protocol.DiagnosticsQueryInput) },
			field:  "input.limit",
			reason: "must not be negative",
		},
		{
			name:   "an input that is an array is refused",
			input:  `[]`,
			into:   func() any { return new(protocol.TurnRef) },
			field:  "input",
			reason: "must be a JSON object",
		},
		{
			name:   "an input that is a string is refused",
			input:  `"s1"`,
			into:   func() any { return new(protocol.TurnRef) },
			field:  "input",
			reason: "must be a JSON object",
		},
		{
			name:   "an input with trailing data is refused",
			input:  `{"sessionId":"s1","turnId":"t1"}x`,
			into:   func() any { return new(protocol.TurnRef) },
			field:  "input",
			reason: "trailing data",
		},
		{
			name:   "an input that is not valid JSON is refused",
			input:  `{"sessionId":}`,
			into:   func() any { return new(protocol.TurnRef) },
			field:  "input",
			reason: "is not valid JSON",
		},
		{
			name:   "an input with invalid UTF-8 is refused",
			input:  "{\"sessionId\":\"\xc3\x28\",\"turnId\":\"t1\"}",
			into:   func() any { return new(protocol.TurnRef) },
			field:  "input",
			reason: "not valid UTF-8",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.into()
			err := protocol.DecodeInput(json.RawMessage(tt.input), v)
			if tt.want != nil {
				if err != nil {
					t.Fatalf("DecodeInput: %v", err)
				}
				if !reflect.DeepEqual(v, tt.want) {
					t.Errorf("decoded %+v, want %+v", v, tt.want)
				}
				return
			}
			wantDecodeError(t, err, tt.field, tt.reason)
		})
	}
}

func TestDecodeInputErrorNamesTheField(t *testing.T) {
	var in protocol.TurnRef
	err := protocol.DecodeInput(json.RawMessage(`{"sessionId":"s1","turnId":5}`), &in)
	const want = `field "input.turnId": must be a string, not number`
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %s", err, want)
	}
}

// Every operation's input decodes from a request's input after
// DecodeClientFrame, and its only failures are field errors under "input".
func TestEveryOperationInputDecodesStrictly(t *testing.T) {
	for _, op := range protocol.Operations() {
		t.Run(op.Name, func(t *testing.T) {
			frame, err := protocol.DecodeClientFrame([]byte(`{"requestId":"r","operation":"` + op.Name + `"}`))
			if err != nil {
				t.Fatalf("DecodeClientFrame: %v", err)
			}
			err = protocol.DecodeInput(frame.Request.Input, reflect.New(op.Input).Interface())
			if err != nil {
				var de *protocol.DecodeError
				if !errors.As(err, &de) || !strings.HasPrefix(de.Field, "input.") {
					t.Errorf("empty input: error = %v, want nil or a field error under input", err)
				}
			}
			err = protocol.DecodeInput(json.RawMessage(`{"notAField":1}`), reflect.New(op.Input).Interface())
			wantDecodeError(t, err, "input.notAField", "is not a known field")
		})
	}
}

func TestDecodeHostFrame(t *testing.T) {
	tests := []struct {
		name     string
		line     string
		kind     string
		response *protocol.Response
		// When the frame is refused: notObject for ErrNotObject, else the
		// DecodeError's field and a part of its reason.
		notObject bool
		field     string
		reason    string
	}{
		{
			name:     "a successful response is decoded",
			line:     `{"requestId":"r1","operation":"host.shutdown","ok":true,"result":{"state":"draining"}}`,
			response: &protocol.Response{RequestID: "r1", Operation: "host.shutdown", OK: true, Result: json.RawMessage(`{"state":"draining"}`)},
		},
		{
			name: "a failed response is decoded",
			line: `{"requestId":"r1","operation":"turn.start","ok":false,"error":{"code":"not_found","message":"no session s1"}}`,
			response: &protocol.Response{
				RequestID: "r1", Operation: "turn.start",
				Error: &protocol.Error{Code: protocol.CodeNotFound, Message: "no session s1"},
			},
		},
		{
			name:     "unknown fields of a response are ignored",
			line:     `{"requestId":"r1","operation":"host.status","ok":true,"result":{},"traceId":"x"}`,
			response: &protocol.Response{RequestID: "r1", Operation: "host.status", OK: true, Result: json.RawMessage(`{}`)},
		},
		{name: "an accepted frame is returned by kind", line: `{"kind":"accepted","hostEpoch":"e1","connectionId":"c1","protocol":1,"principal":{"id":"local_os_user","kind":"local_owner"}}`, kind: protocol.KindAccepted},
		{name: "an incompatible frame is returned by kind", line: `{"kind":"incompatible","reason":"protocol","hostProtocolMin":2,"hostProtocolMax":2,"hostCompatibilityEpoch":1}`, kind: protocol.KindIncompatible},
		{name: "a pushed frame is returned by kind", line: `{"kind":"subscription.session_delta","hostEpoch":"e1","subscriptionId":"s1","sequence":3,"delta":{}}`, kind: protocol.KindSessionDelta},
		{name: "an unknown kind is returned for the caller to judge", line: `{"kind":"subscription.future","extra":true}`, kind: "subscription.future"},
		{name: "a response without requestId is refused", line: `{"operation":"host.status","ok":true,"result":{}}`, field: "requestId", reason: "is required"},
		{name: "a failed response without error is refused", line: `{"requestId":"r1","operation":"host.status","ok":false}`, field: "error", reason: "is required"},
		{name: "a response field of the wrong type is named", line: `{"requestId":"r1","operation":"host.status","ok":"yes"}`, field: "ok", reason: "must be a boolean, not string"},
		{name: "an error code of the wrong type is named", line: `{"requestId":"r1","ok":false,"error":{"code":5}}`, field: "error.code", reason: "must be a string, not number"},
		{name: "a JSON array is not an object", line: `[]`, notObject: true},
		{name: "a JSON string is not an object", line: `"accepted"`, notObject: true},
		{name: "a JSON number is not an object", line: `1`, notObject: true},
		{name: "invalid JSON is refused", line: `{"kind":}`, field: "", reason: "is not valid JSON"},
		{name: "trailing data is refused", line: `{"kind":"accepted"} {}`, field: "", reason: "is not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := protocol.DecodeHostFrame([]byte(tt.line))
			switch {
			case tt.kind != "" || tt.response != nil:
				if err != nil {
					t.Fatalf("DecodeHostFrame: %v", err)
				}
				if got.Kind != tt.kind {
					t.Errorf("Kind = %q, want %q", got.Kind, tt.kind)
				}
				if !reflect.DeepEqual(got.Response, tt.response) {
					t.Errorf("Response = %+v, want %+v", got.Response, tt.response)
				}
				if string(got.Raw) != tt.line {
					t.Errorf("Raw = %s, want the whole line", got.Raw)
				}
			case tt.notObject:
				if !errors.Is(err, protocol.ErrNotObject) {
					t.Fatalf("error = %v, want ErrNotObject", err)
				}
			default:
				wantDecodeError(t, err, tt.field, tt.reason)
			}
		})
	}
}

// A kinded host frame decodes into its type, the embedded header included.
func TestDecodeHostFramePushedIntoItsType(t *testing.T) {
	line := `{"kind":"subscription.runtime_resource_pty_data","hostEpoch":"e1","subscriptionId":"sub1","sequence":9,"sessionId":"s1","ref":"pty-1","ptySequence":4,"data":"$ ls\r\n"}`
	hf, err := protocol.DecodeHostFrame([]byte(line))
	if err != nil {
		t.Fatalf("DecodeHostFrame: %v", err)
	}
	var f protocol.RuntimeResourcePtyDataFrame
	if err := json.Unmarshal(hf.Raw, &f); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	want := protocol.RuntimeResourcePtyDataFrame{
		Pushed:                 protocol.Pushed{Kind: protocol.KindRuntimeResourcePtyData, HostEpoch: "e1", SubscriptionID: "sub1", Sequence: 9},
		RuntimeResourcePtyData: protocol.RuntimeResourcePtyData{SessionID: "s1", Ref: "pty-1", PtySequence: 4, Data: "$ ls\r\n"},
	}
	if f != want {
		t.Errorf("frame = %+v, want %+v", f, want)
	}
}

// A frame nested as deep as a message allows is refused by the JSON depth
// bound without deep recursion: decoding runs within a 4 MiB stack (a
// deeper stack is a fatal error that ends the test binary).
func TestDeeplyNestedFrameIsRefusedWithoutDeepRecursion(t *testing.T) {
	defer debug.SetMaxStack(debug.SetMaxStack(4 << 20))
	n := protocol.MaxMessageBytes / 2
	deep := strings.Repeat("[", n) + strings.Repeat("]", n)
	lines := map[string]string{
		"in a request's input":  `{"requestId":"r1","operation":"host.status","input":` + deep + `}`,
		"in a field of a frame": `{"requestId":` + deep + `}`,
	}
	for name, line := range lines {
		t.Run(name, func(t *testing.T) {
			_, err := protocol.DecodeClientFrame([]byte(line))
			wantDecodeError(t, err, "", "exceeded max depth")
		})
	}
	var in protocol.PtyInterestInput
	err := protocol.DecodeInput(json.RawMessage(`{"refs":`+deep+`}`), &in)
	wantDecodeError(t, err, "input", "exceeded max depth")
}

func ptr[T any](v T) *T { return &v }

// Every operation has an access level, and every input that names an
// existing session by a sessionId field says so through SessionScoped, so
// the one check at dispatch sees the session it acts on.
func TestEveryOperationHasAnAccessAndItsSession(t *testing.T) {
	levels := []protocol.Access{protocol.AccessRead, protocol.AccessWrite, protocol.AccessControl, protocol.AccessOwner}
	for _, op := range protocol.Operations() {
		if !slices.Contains(levels, op.Access) {
			t.Errorf("%s has access %q, none of %v", op.Name, op.Access, levels)
		}
		_, hasField := op.Input.FieldByName("SessionID")
		_, scoped := reflect.New(op.Input).Interface().(protocol.SessionScoped)
		if creates := op.Name == string(protocol.OpSessionCreate); hasField && !creates && !scoped {
			t.Errorf("%s takes %v, which names a session but is not protocol.SessionScoped", op.Name, op.Input)
		}
		if scoped && !hasField {
			t.Errorf("%s takes %v, which is SessionScoped without a sessionId", op.Name, op.Input)
		}
	}
}
