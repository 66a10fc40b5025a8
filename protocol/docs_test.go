package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"reflect"
	"regexp"
	"testing"

	"github.com/agentd-dev/agentd/protocol"
)

// docPath is the protocol's written description. Its ```json blocks hold
// only valid frames and records, one JSON object after another; invalid
// examples go in ```text blocks.
const docPath = "../docs/protocol.md"

var jsonBlock = regexp.MustCompile("(?s)```json\n(.*?)```")

// Every example in docs/protocol.md decodes strictly into its Go type with
// every required field present, and every operation, frame kind and the
// registration record has one.
func TestDocExamplesMatchGoTypes(t *testing.T) {
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("reading the protocol's description: %v", err)
	}
	requests := make(map[string]bool)
	results := make(map[string]bool)
	kinds := make(map[string]bool)
	events := make(map[string]bool)
	registration := false
	for _, block := range jsonBlock.FindAllSubmatch(doc, -1) {
		dec := json.NewDecoder(bytes.NewReader(block[1]))
		for {
			var raw json.RawMessage
			if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("a json block is not a run of JSON values: %v\n%s", err, block[1])
			}
			var head struct {
				Kind          *string
				RequestID     *string `json:"requestId"`
				Operation     string
				OK            *bool
				SchemaVersion *int `json:"schemaVersion"`
			}
			if err := json.Unmarshal(raw, &head); err != nil {
				t.Errorf("example %s: %v", raw, err)
				continue
			}
			switch {
			case head.Kind != nil:
				kinds[*head.Kind] = true
				if checkKindedExample(t, *head.Kind, raw) && *head.Kind == protocol.KindSessionDelta {
					var f struct{ Delta struct{ Event string } }
					json.Unmarshal(raw, &f)
					events[f.Delta.Event] = true
				}
			case head.OK != nil:
				if checkResponseExample(t, raw) && *head.OK {
					results[head.Operation] = true
				}
			case head.RequestID != nil:
				if checkRequestExample(t, raw) {
					requests[head.Operation] = true
				}
			case head.SchemaVersion != nil:
				registration = true
				checkStrict(t, raw, reflect.TypeFor[protocol.Registration]())
			default:
				t.Errorf("example %s is no frame or record", raw)
			}
		}
	}
	for _, op := range protocol.Operations() {
		if !requests[op.Name] {
			t.Errorf("%s has no request example", op.Name)
		}
		if !results[op.Name] {
			t.Errorf("%s has no successful response example", op.Name)
		}
	}
	for _, k := range append([]string{protocol.KindHello, protocol.KindAccepted, protocol.KindIncompatible}, protocol.PushedKinds...) {
		if !kinds[k] {
			t.Errorf("no example of a %s frame", k)
		}
	}
	if !registration {
		t.Error("no example of a registration record")
	}
	for _, e := range deltaEvents {
		if !events[e] {
			t.Errorf("no example of the %s delta event", e)
		}
	}
}

// deltaEvents are the session delta events the description documents.
var deltaEvents = []string{
	protocol.EventRunStart, protocol.EventMessageStart, protocol.EventMessageUpdate, protocol.EventMessageEnd,
	protocol.EventToolCallStart, protocol.EventToolCallUpdate, protocol.EventToolCallEnd, protocol.EventEntryAdded,
	protocol.EventRunEnd, protocol.EventQueueChanged, protocol.EventInteractionAdded, protocol.EventInteractionResolved,
	protocol.EventTodoChanged, protocol.EventSessionChanged,
}

// embedded names the raw JSON fields of frames and results that carry a
// known Go type: the examples' contents are checked against it too.
var embedded = map[string]struct {
	field string
	typ   reflect.Type
}{
	protocol.KindSessionProjection:      {"snapshot", reflect.TypeFor[protocol.SessionProjection]()},
	protocol.KindSessionDelta:           {"delta", reflect.TypeFor[protocol.SessionDelta]()},
	string(protocol.OpSubscriptionOpen): {"snapshot", reflect.TypeFor[protocol.SessionProjection]()},
}

// checkEmbedded checks the field of raw that embedded names for key, if any.
func checkEmbedded(t *testing.T, key string, raw json.RawMessage) bool {
	t.Helper()
	e, ok := embedded[key]
	if !ok {
		return true
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Errorf("example %s: %v", raw, err)
		return false
	}
	return checkStrict(t, fields[e.field], e.typ)
}

var kindTypes = map[string]reflect.Type{
	protocol.KindAccepted:               reflect.TypeFor[protocol.Accepted](),
	protocol.KindIncompatible:           reflect.TypeFor[protocol.Incompatible](),
	protocol.KindRefused:                reflect.TypeFor[protocol.Refused](),
	protocol.KindSessionProjection:      reflect.TypeFor[protocol.SessionProjectionFrame](),
	protocol.KindSessionDelta:           reflect.TypeFor[protocol.SessionDeltaFrame](),
	protocol.KindRuntimeResourceUpdate:  reflect.TypeFor[protocol.RuntimeResourceUpdateFrame](),
	protocol.KindRuntimeResourcePtyData: reflect.TypeFor[protocol.RuntimeResourcePtyDataFrame](),
	protocol.KindSubscriptionClosed:     reflect.TypeFor[protocol.SubscriptionClosedFrame](),
	protocol.KindSessionListUpdate:      reflect.TypeFor[protocol.SessionListUpdateFrame](),
}

func checkKindedExample(t *testing.T, kind string, raw json.RawMessage) bool {
	t.Helper()
	if kind == protocol.KindHello {
		f, err := protocol.DecodeClientFrame(raw)
		if err != nil || f.Hello == nil {
			t.Errorf("hello example %s: %v", raw, err)
			return false
		}
		return checkPresent(t, raw, raw, reflect.TypeFor[protocol.Hello]())
	}
	typ, ok := kindTypes[kind]
	if !ok {
		t.Errorf("example %s: unknown kind %q", raw, kind)
		return false
	}
	if _, err := protocol.DecodeHostFrame(raw); err != nil {
		t.Errorf("example %s: %v", raw, err)
		return false
	}
	return checkStrict(t, raw, typ) && checkEmbedded(t, kind, raw)
}

func checkRequestExample(t *testing.T, raw json.RawMessage) bool {
	t.Helper()
	f, err := protocol.DecodeClientFrame(raw)
	if err != nil || f.Request == nil {
		t.Errorf("request example %s: %v", raw, err)
		return false
	}
	op, ok := protocol.Lookup(f.Request.Operation)
	if !ok {
		t.Errorf("request example %s: unknown operation", raw)
		return false
	}
	if err := protocol.DecodeInput(f.Request.Input, reflect.New(op.Input).Interface()); err != nil {
		t.Errorf("request example %s: %v", raw, err)
		return false
	}
	return checkPresent(t, raw, f.Request.Input, op.Input)
}

func checkResponseExample(t *testing.T, raw json.RawMessage) bool {
	t.Helper()
	hf, err := protocol.DecodeHostFrame(raw)
	if err != nil || hf.Response == nil {
		t.Errorf("response example %s: %v", raw, err)
		return false
	}
	if !checkStrict(t, raw, reflect.TypeFor[protocol.Response]()) {
		return false
	}
	r := hf.Response
	op, ok := protocol.Lookup(r.Operation)
	if !ok {
		t.Errorf("response example %s: unknown operation", raw)
		return false
	}
	if !r.OK {
		if !r.Error.Code.Valid() {
			t.Errorf("response example %s: unknown error code", raw)
			return false
		}
		return true
	}
	if len(r.Result) == 0 {
		t.Errorf("response example %s: ok without a result", raw)
		return false
	}
	return checkStrict(t, r.Result, op.Result) && checkEmbedded(t, r.Operation, r.Result)
}

// checkStrict decodes raw strictly into a new typ and checks that every
// field without omitempty is present.
func checkStrict(t *testing.T, raw json.RawMessage, typ reflect.Type) bool {
	t.Helper()
	if err := protocol.DecodeInput(raw, reflect.New(typ).Interface()); err != nil {
		t.Errorf("example %s does not decode into %v: %v", raw, typ, err)
		return false
	}
	return checkPresent(t, raw, raw, typ)
}

// checkPresent reports whether raw (a part of example) holds every field
// of typ without omitempty, at every depth.
func checkPresent(t *testing.T, example, raw json.RawMessage, typ reflect.Type) bool {
	t.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) || typ == rawMessageType || typ == timeType {
		return true
	}
	switch typ.Kind() {
	case reflect.Slice:
		var elems []json.RawMessage
		if json.Unmarshal(raw, &elems) != nil {
			return true // the strict decode has reported it
		}
		ok := true
		for _, e := range elems {
			ok = checkPresent(t, example, e, typ.Elem()) && ok
		}
		return ok
	case reflect.Struct:
	default:
		return true
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return true
	}
	ok := true
	for _, f := range goFields(typ) {
		v, present := fields[f.name]
		if !present {
			if !f.omitempty {
				t.Errorf("example %s: %v lacks required field %q", example, typ, f.name)
				ok = false
			}
			continue
		}
		ok = checkPresent(t, example, v, f.typ) && ok
	}
	return ok
}

var operationRow = regexp.MustCompile("(?m)^\\| \\[`([a-z_.]+)`\\]\\(#[a-z_]+\\) \\| ([a-z, ]+) \\| ([a-z]+) \\|")

// The table of operations in docs/protocol.md gives every operation's mode
// and access level as protocol.Operations() has them, in its order.
func TestDocOperationTableMatchesTheTable(t *testing.T) {
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("reading the protocol's description: %v", err)
	}
	rows := operationRow.FindAllSubmatch(doc, -1)
	if len(rows) != len(protocol.Operations()) {
		t.Fatalf("the description's table has %d operations, the protocol %d", len(rows), len(protocol.Operations()))
	}
	for i, op := range protocol.Operations() {
		name, mode, access := string(rows[i][1]), string(rows[i][2]), string(rows[i][3])
		want := string(op.Mode)
		if op.Serial {
			want += ", serial"
		}
		if name != op.Name || mode != want || access != string(op.Access) {
			t.Errorf("row %d is %s (%s, %s); the table has %s (%s, %s)", i+1, name, mode, access, op.Name, want, op.Access)
		}
	}
}
