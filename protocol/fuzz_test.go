package protocol_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentd-dev/agentd/protocol"
)

// Seeds shared by the client frame fuzzers; more live under testdata/fuzz.
var clientFrameSeeds = []string{
	validHello,
	`{"kind":"hello","clientInstanceId":"c","protocolMin":0,"protocolMax":9,"compatibilityEpoch":-1,"compositionId":"x"}`,
	`{"kind":"hello","clientInstanceId":"\u00e9\ud800","protocolMin":1,"protocolMax":1,"compatibilityEpoch":1,"compositionId":"a\u2028b","surface":""}`,
	`{"kind":"hello","KIND":"hello"}`,
	`{"requestId":"r1","operation":"turn.start","input":{"sessionId":"s","turnId":"t","content":{"text":"hi"}}}`,
	`{"requestId":"r1","operation":"host.status","input":null}`,
	`{"requestId":"r1","operation":"host.status","input":[1,{"a":{}}]}`,
	`{"requestId":"r1","requestId":"r2"}`,
	`{"requestId":1e400}`,
	`{"protocolMin":-9223372036854775809}`,
	`{"kind":"hello"} {}`,
	"{\"requestId\":\"\xff\"}",
	`[]`,
	``,
}

// decodeErrorOrNotObject fails unless err is nil, ErrNotObject or a
// *DecodeError: the only errors the decoders promise.
func decodeErrorOrNotObject(t *testing.T, err error) {
	t.Helper()
	var de *protocol.DecodeError
	if err != nil && !errors.Is(err, protocol.ErrNotObject) && !errors.As(err, &de) {
		t.Fatalf("error %v (%T) is neither ErrNotObject nor a *DecodeError", err, err)
	}
}

func FuzzDecodeClientFrame(f *testing.F) {
	for _, s := range clientFrameSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		frame, err := protocol.DecodeClientFrame(line)
		decodeErrorOrNotObject(t, err)
		if err != nil {
			if frame.Hello != nil || frame.Request != nil {
				t.Fatalf("frame %+v returned with error %v", frame, err)
			}
			return
		}
		if (frame.Hello == nil) == (frame.Request == nil) {
			t.Fatalf("frame %+v: want exactly one of Hello and Request", frame)
		}
		if !utf8.Valid(line) {
			t.Fatalf("accepted invalid UTF-8: %q", line)
		}
		if r := frame.Request; r != nil {
			if r.RequestID == "" || len(r.RequestID) > protocol.MaxRequestIDBytes || r.Operation == "" {
				t.Fatalf("request %+v breaks the frame's rules", r)
			}
			if !json.Valid(r.Input) || strings.TrimSpace(string(r.Input)) == "null" {
				t.Fatalf("request input %q is not a JSON value other than null", r.Input)
			}
			// The request re-encodes and decodes to the same request.
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatalf("Marshal(%+v): %v", r, err)
			}
			again, err := protocol.DecodeClientFrame(b)
			if err != nil {
				t.Fatalf("re-decoding %s: %v", b, err)
			}
			if again.Request == nil || again.Request.RequestID != r.RequestID || again.Request.Operation != r.Operation {
				t.Fatalf("request %+v re-decoded as %+v", r, again)
			}
		}
	})
}

func FuzzHandshake(f *testing.F) {
	for _, s := range clientFrameSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		frame, err := protocol.DecodeClientFrame(line)
		decodeErrorOrNotObject(t, err)
		if err != nil || frame.Hello == nil {
			return
		}
		h := frame.Hello
		if h.Kind != protocol.KindHello || h.ClientInstanceID == "" || h.CompositionID == "" || h.ProtocolMax < h.ProtocolMin {
			t.Fatalf("hello %+v breaks the frame's rules", h)
		}
		b, err := json.Marshal(h)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", h, err)
		}
		again, err := protocol.DecodeClientFrame(b)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", b, err)
		}
		if again.Hello == nil || *again.Hello != *h {
			t.Fatalf("hello %+v re-decoded from %s as %+v", h, b, again.Hello)
		}
	})
}

// fuzzInputTypes are the inputs FuzzDecodeInput decodes into: nested
// objects, pointers, arrays, unsigned and signed integers, booleans.
var fuzzInputTypes = []reflect.Type{
	reflect.TypeFor[protocol.TurnStartInput](),
	reflect.TypeFor[protocol.TranscriptPageInput](),
	reflect.TypeFor[protocol.ControlInput](),
	reflect.TypeFor[protocol.PtyInterestInput](),
	reflect.TypeFor[protocol.ResourceQueryInput](),
	reflect.TypeFor[protocol.ResourceStartInput](),
	reflect.TypeFor[protocol.SubscriptionOpenInput](),
	reflect.TypeFor[protocol.HostStatusInput](),
}

func FuzzDecodeInput(f *testing.F) {
	seeds := []struct {
		which uint8
		input string
	}{
		{0, `{"sessionId":"s","turnId":"t","content":{"text":"hi"}}`},
		{0, `{"sessionId":"s","turnId":"t","content":{"text":"hi","Text":"x"}}`},
		{1, `{"subscriptionId":"sub","direction":"older","throughSequence":null,"cursor":"c1","anchorSequence":18446744073709551615,"maxBytes":1024}`},
		{2, `{"sessionId":"s","ref":"r","controllerId":"c","sequence":1,"data":"ls\r","cols":80,"rows":-24}`},
		{3, `{"subscriptionId":"sub","refs":["a","b",null]}`},
		{4, `{"sessionId":"s","revision":3,"cursor":null,"limit":10}`},
		{5, `{"sessionId":"s","launchId":"l","command":"make","pty":true,"cols":80,"rows":24}`},
		{6, `{"sessionId":"s","transcript":{"kind":"tail"}}`},
		{7, `{}`},
	}
	for _, s := range seeds {
		f.Add(s.which, []byte(s.input))
	}
	f.Fuzz(func(t *testing.T, which uint8, input []byte) {
		typ := fuzzInputTypes[int(which)%len(fuzzInputTypes)]
		v := reflect.New(typ).Interface()
		err := protocol.DecodeInput(input, v)
		if err != nil {
			var de *protocol.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v (%T) is not a *DecodeError", err, err)
			}
			if de.Field != "input" && !strings.HasPrefix(de.Field, "input.") {
				t.Fatalf("error %v names a field outside input", err)
			}
			return
		}
		// A decoded input re-encodes and decodes to an equal value.
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", v, err)
		}
		again := reflect.New(typ).Interface()
		if err := protocol.DecodeInput(b, again); err != nil {
			t.Fatalf("re-decoding %s: %v", b, err)
		}
		if !reflect.DeepEqual(v, again) {
			t.Fatalf("%+v re-decoded from %s as %+v", v, b, again)
		}
	})
}

func FuzzDecodeHostFrame(f *testing.F) {
	seeds := []string{
		`{"kind":"accepted","hostEpoch":"e","connectionId":"c1","protocol":1,"principal":{"id":"local_os_user","kind":"local_owner"}}`,
		`{"kind":"incompatible","reason":"r","hostProtocolMin":1,"hostProtocolMax":1,"hostCompatibilityEpoch":1}`,
		`{"requestId":"r1","operation":"host.status","ok":true,"result":{"state":"ready"}}`,
		`{"requestId":"r1","operation":"x","ok":false,"error":{"code":"not_found","message":"m"}}`,
		`{"requestId":"r1","ok":false,"error":null}`,
		`{"kind":"subscription.session_delta","hostEpoch":"e","subscriptionId":"s","sequence":2,"delta":{}}`,
		`{"kind":"subscription.runtime_resource_pty_data","hostEpoch":"e","subscriptionId":"s","sequence":1,"sessionId":"s","ref":"p","ptySequence":1,"data":"\u001b[0m"}`,
		`{"kind":"subscription.closed","hostEpoch":"e","subscriptionId":"s","sequence":5,"reason":"slow_consumer"}`,
		`{"kind":1}`,
		`{"requestId":"r","ok":true} x`,
		`"x"`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	pushed := map[string]func() any{
		protocol.KindSessionProjection:      func() any { return new(protocol.SessionProjectionFrame) },
		protocol.KindSessionDelta:           func() any { return new(protocol.SessionDeltaFrame) },
		protocol.KindRuntimeResourceUpdate:  func() any { return new(protocol.RuntimeResourceUpdateFrame) },
		protocol.KindRuntimeResourcePtyData: func() any { return new(protocol.RuntimeResourcePtyDataFrame) },
		protocol.KindSubscriptionClosed:     func() any { return new(protocol.SubscriptionClosedFrame) },
		protocol.KindSessionListUpdate:      func() any { return new(protocol.SessionListUpdateFrame) },
		protocol.KindAccepted:               func() any { return new(protocol.Accepted) },
		protocol.KindIncompatible:           func() any { return new(protocol.Incompatible) },
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		frame, err := protocol.DecodeHostFrame(line)
		decodeErrorOrNotObject(t, err)
		if err != nil {
			return
		}
		if string(frame.Raw) != string(line) {
			t.Fatalf("Raw = %q, want the line %q", frame.Raw, line)
		}
		if frame.Kind == "" {
			r := frame.Response
			if r == nil || r.RequestID == "" || (!r.OK && r.Error == nil) {
				t.Fatalf("response %+v breaks the frame's rules", r)
			}
			return
		}
		if frame.Response != nil {
			t.Fatalf("kind %q frame carries a response", frame.Kind)
		}
		if mk, ok := pushed[frame.Kind]; ok {
			_ = json.Unmarshal(frame.Raw, mk()) // must not panic
		}
	})
}
