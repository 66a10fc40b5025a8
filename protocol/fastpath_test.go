package protocol

import (
	"bytes"
	"testing"
)

// decodeGeneral decodes a client frame without the fast path.
func decodeGeneral(line []byte) (ClientFrame, error) {
	var env clientEnvelope
	if err := decodeStrict(line, &env, ""); err != nil {
		return ClientFrame{}, err
	}
	if env.Kind != nil || env.RequestID == nil || env.Operation == nil || env.Input == nil {
		return ClientFrame{}, ErrNotObject
	}
	return ClientFrame{Request: &Request{RequestID: *env.RequestID, Operation: *env.Operation, Input: env.Input}}, nil
}

// FuzzFastRequestMatchesGeneralPath: whatever the fast path accepts, the
// general path accepts too, with the same request.
func FuzzFastRequestMatchesGeneralPath(f *testing.F) {
	for _, s := range []string{
		`{"requestId":"r1","operation":"host.status","input":{}}`,
		`{ "operation" : "turn.query" , "input" : {"sessionId":"s","turnId":"t"}, "requestId":"x" }`,
		`{"requestId":"r1","operation":"host.status","input":{"a":[1,{"b":"}"}]}}`,
		`{"requestId":"r1","requestId":"r2","operation":"o","input":{}}`,
		`{"requestId":"r\u0031","operation":"o","input":{}}`,
		`{"requestId":"r1","operation":"o","input":{}} trailing`,
		`{"requestId":"r1","operation":"o","input":{"x":}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		fast, ok := fastRequest(line)
		if !ok {
			return
		}
		general, err := decodeGeneral(line)
		if err != nil {
			t.Fatalf("fast path accepted %q, general path refused it: %v", line, err)
		}
		g := general.Request
		if fast.RequestID != g.RequestID || fast.Operation != g.Operation || !bytes.Equal(fast.Input, g.Input) {
			t.Fatalf("fast %+v, general %+v for %q", fast, g, line)
		}
	})
}

func TestFastPathLeavesInvalidUTF8ToTheGeneralPath(t *testing.T) {
	line := []byte("{\"requestId\":\"r\",\"operation\":\"o\",\"input\":{\"a\":\"\xff\"}}")
	if _, ok := fastRequest(line); ok {
		t.Fatal("fast path accepted invalid UTF-8")
	}
	if _, err := DecodeClientFrame(line); err == nil {
		t.Fatal("invalid UTF-8 accepted")
	}
}
