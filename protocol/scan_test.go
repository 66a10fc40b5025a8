package protocol

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

var scanSeeds = []string{
	`{"kind":"subscription.runtime_resource_pty_data","hostEpoch":"e","subscriptionId":"s","sequence":1,"sessionId":"s","ref":"pty-1","ptySequence":7,"data":"a\u001b[0m\r\n\"q\" \\ é"}`,
	`{"requestId":"r1","operation":"host.status","ok":true,"result":{"state":"ready","n":[1,-2.5e3,true,null,{}]}}`,
	`{"requestId":"r1","ok":false,"error":{"code":"not_found","message":"m"},"error":{"message":"n"}}`,
	`{"requestId":"r1","ok":false,"error":null,"result":null}`,
	` {"KIND":"x","Sequence":3,"kind":null, "ptysequence":2,"Screen":true,"DATA":"d"} `,
	`{"kind":"k\u00e9","sequence":18446744073709551615}`,
	`{"sequence":18446744073709551616}`,
	`{"sequence":-0,"kind":"x"}`,
	`{"sequence":1.0,"kind":"x"}`,
	`{"kind":5}`,
	`{"kind":"a","x":[}`,
	`{"kind":"a","x":"\x01"}`,
	`{"kind":"a","x":"\q"}`,
	`{"kind":"a","x":"\u12g4"}`,
	`{"kind":"a","x":01}`,
	`{"kind":"a","x":tru}`,
	`{"kind":"a"} {}`,
	`{"k\u0069nd":"a"}`,
	"{\"kind\":\"a\xff\"}",
	`{"data":7,"ref":"r"}`,
	`{"data":"x","ref":"r",}`,
	`{}`,
	`[]`,
}

// FuzzScanHostHead: what the scan decodes of a frame's head,
// json.Unmarshal decodes alike; what json.Unmarshal refuses, the scan
// refuses.
func FuzzScanHostHead(f *testing.F) {
	fuzzScanAgainstUnmarshal(f, (*hostHead).scan)
}

// FuzzScanPtyDataFields is FuzzScanHostHead for a PTY's output frame.
func FuzzScanPtyDataFields(f *testing.F) {
	fuzzScanAgainstUnmarshal(f, (*PtyDataFields).scan)
}

// fuzzScanAgainstUnmarshal fuzzes scan, a decoder of T, against
// json.Unmarshal into T.
func fuzzScanAgainstUnmarshal[T any](f *testing.F, scan func(*T, []byte) bool) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var scanned, decoded T
		if !scan(&scanned, b) {
			return
		}
		if err := json.Unmarshal(b, &decoded); err != nil {
			t.Fatalf("the scan took %q, which json.Unmarshal refuses: %v", b, err)
		}
		if !reflect.DeepEqual(scanned, decoded) {
			t.Fatalf("%q: the scan read %+v, json.Unmarshal %+v", b, scanned, decoded)
		}
	})
}

// FuzzScanValue: the scan takes a JSON value exactly when encoding/json
// does.
func FuzzScanValue(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`[{"a":[1,{"b":{}},[]],"c":{"d":[[],{}]}},[[{}]]]`))
	f.Add([]byte(`{"a":[1,}`))
	f.Add([]byte(`[1 2]`))
	f.Add([]byte(`{"a" 1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		v := bytes.Trim(b, " \t\r\n")
		whole := scanValue(v, 0, 0) == len(v)
		if valid := json.Valid(b); whole != valid {
			t.Fatalf("%q: the scan took it: %v, json.Valid: %v", b, whole, valid)
		}
	})
}

// The scan follows nesting exactly as deep as encoding/json does, objects
// and arrays counted together, and no deeper.
func TestScanNestsAsDeepAsEncodingJSON(t *testing.T) {
	for name, objectAt := range map[string]func(level int) bool{
		"arrays":  func(int) bool { return false },
		"objects": func(int) bool { return true },
		"both":    func(level int) bool { return level%3 == 1 },
	} {
		for _, depth := range []int{maxScanDepth - 1, maxScanDepth, maxScanDepth + 1} {
			var opening, closing []byte
			for level := range depth {
				if objectAt(level) {
					opening, closing = append(opening, `{"a":`...), append(closing, '}')
				} else {
					opening, closing = append(opening, '['), append(closing, ']')
				}
			}
			slices.Reverse(closing)
			v := slices.Concat(opening, []byte("null"), closing)
			whole := scanValue(v, 0, 0) == len(v)
			if valid := json.Valid(v); whole != valid {
				t.Errorf("%s %d deep: the scan took it: %v, json.Valid: %v", name, depth, whole, valid)
			}
		}
	}
}

// The frames agentd writes take the scan, not the slower general decode.
func TestScanTakesTheFramesAgentdWrites(t *testing.T) {
	pty := mustJSON(t, RuntimeResourcePtyDataFrame{
		Pushed:                 Pushed{Kind: KindRuntimeResourcePtyData, HostEpoch: "e", SubscriptionID: "s.1", Sequence: 9},
		RuntimeResourcePtyData: RuntimeResourcePtyData{SessionID: "s", Ref: "pty-1", PtySequence: 4, Data: "\x1b[1mé\r\n\"\\\t"},
	})
	for _, line := range []string{
		pty,
		mustJSON(t, Response{RequestID: "r1", Operation: string(OpHostStatus), OK: true, Result: json.RawMessage(`{"state":"ready"}`)}),
		mustJSON(t, Response{RequestID: "r2", Operation: string(OpHostStatus), Error: &Error{Code: CodeNotFound, Message: "m"}}),
	} {
		var h hostHead
		if !h.scan([]byte(line)) {
			t.Errorf("the head of %s was not scanned", line)
		}
	}
	var f PtyDataFields
	if !f.scan([]byte(pty)) {
		t.Errorf("the fields of %s were not scanned", pty)
	}
}

// FuzzDecodePtyDataFrame: the one-pass decode of a PTY output frame
// reads what json.Unmarshal reads, and refuses what it refuses.
func FuzzDecodePtyDataFrame(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"data":"\ud83d\ude00 \ud83d \ude00\u0041 \ud83dx \u00e9 \/ \b\f"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast, decoded RuntimeResourcePtyDataFrame
		errFast, err := DecodePtyDataFrame(b, &fast), json.Unmarshal(b, &decoded)
		if (errFast == nil) != (err == nil) {
			t.Fatalf("%q: decoded with %v, json.Unmarshal %v", b, errFast, err)
		}
		if err == nil && fast != decoded {
			t.Fatalf("%q: decoded %+v, json.Unmarshal %+v", b, fast, decoded)
		}
	})
}

// FuzzUnquote: a string literal's text reads as json.Unmarshal reads it.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`""`, `"a\u001b[m\r\n"`, `"\ud83d\ude00\ud83d\u0041\udc00"`, "\"\xff\xe2\x82\"", `"\"\\\/\b\f\n\r\t"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, lit []byte) {
		if scanString(lit, 0) != len(lit) || lit[0] != '"' {
			return
		}
		var want string
		if err := json.Unmarshal(lit, &want); err != nil {
			t.Fatalf("%q scanned as a string, json.Unmarshal: %v", lit, err)
		}
		if got := string(appendUnquoted(nil, lit[1:len(lit)-1])); got != want {
			t.Fatalf("%q read %q, json.Unmarshal %q", lit, got, want)
		}
	})
}
