package protocol

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// A PTY's output relayed without decoding reads, to a client, as the
// frame the worker wrote; two pieces joined read as one.
func TestPtyDataFieldsRelayTheOutputUnchanged(t *testing.T) {
	first := RuntimeResourcePtyData{SessionID: "s1", Ref: "pty-1", PtySequence: 3, Data: "\x1b[1mbold\x1b[m \"quoted\" é\r\n"}
	second := RuntimeResourcePtyData{SessionID: "s1", Ref: "pty-1", PtySequence: 4, Data: "\\ back\tslash \u2028"}
	a, b := decodeRelayed(t, first), decodeRelayed(t, second)
	if got := decodeData(t, AppendPtyDataFrame(nil, Pushed{}, &a)); got != first {
		t.Fatalf("relayed %+v, want %+v", got, first)
	}
	a.Data = JoinJSONStrings(append([]byte(nil), a.Data...), b.Data)
	a.PtySequence = b.PtySequence
	want := first
	want.Data, want.PtySequence = first.Data+second.Data, 4
	if got := decodeData(t, AppendPtyDataFrame(nil, Pushed{}, &a)); got != want {
		t.Fatalf("joined %+v, want %+v", got, want)
	}
}

func TestDecodePtyDataFieldsNamesWhatIsWrong(t *testing.T) {
	for in, field := range map[string]string{
		`{"ref":"pty-1","data":7}`:  "data",
		`{"ref":"pty-1"}`:           "data",
		`{"data":"x"}`:              "ref",
		`{"ref":"pty-1","data":"x"`: "",
	} {
		_, err := DecodePtyDataFields([]byte(in))
		if err == nil {
			t.Fatalf("%s decoded", in)
		}
		if field != "" && !containsField(err, field) {
			t.Fatalf("%s: %v, want it to name %s", in, err, field)
		}
	}
}

func containsField(err error, field string) bool {
	return strings.Contains(err.Error(), field)
}

func FuzzPtyDataFields(f *testing.F) {
	f.Add([]byte(`{"kind":"subscription.runtime_resource_pty_data","sessionId":"s","ref":"pty-1","ptySequence":1,"data":"a\u001b[m\n"}`), []byte(`"b\\\"c"`))
	f.Add([]byte(`{"ref":"r","data":"","screen":true}`), []byte(`""`))
	f.Fuzz(func(t *testing.T, frame, more []byte) {
		fields, err := DecodePtyDataFields(frame)
		if err != nil {
			return
		}
		var text string
		if json.Unmarshal(fields.Data, &text) != nil {
			t.Fatalf("data %q decoded but is not a JSON string", fields.Data)
		}
		if got := fields.AppendData([]byte("kept")); string(got) != "kept"+text {
			t.Fatalf("data %q appended as %q, json.Unmarshal reads %q", fields.Data, got, text)
		}
		out := AppendPtyDataFrame(nil, Pushed{Kind: KindRuntimeResourcePtyData, SubscriptionID: "s"}, &fields)
		var back RuntimeResourcePtyDataFrame
		if err := json.Unmarshal(out, &back); err != nil || back.Ref != fields.Ref || back.Data != text || back.Screen != fields.Screen || back.PtySequence != fields.PtySequence {
			t.Fatalf("relayed %q: %+v, %v", out, back, err)
		}
		var tail string
		if json.Unmarshal(more, &tail) != nil {
			return
		}
		more = []byte(mustJSON(t, tail)) // as a relay receives it: compact
		if !utf8.Valid(fields.Data) {
			return // a character cut in two would join into one
		}
		var joined string
		if err := json.Unmarshal(JoinJSONStrings(append([]byte(nil), fields.Data...), more), &joined); err != nil || joined != text+tail {
			t.Fatalf("joined %q and %q: %q, %v", fields.Data, more, joined, err)
		}
	})
}

func decodeRelayed(t *testing.T, d RuntimeResourcePtyData) PtyDataFields {
	t.Helper()
	f, err := DecodePtyDataFields([]byte(mustJSON(t, RuntimeResourcePtyDataFrame{Pushed: Pushed{Kind: KindRuntimeResourcePtyData, SubscriptionID: "w", Sequence: 9}, RuntimeResourcePtyData: d})))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func decodeData(t *testing.T, b []byte) RuntimeResourcePtyData {
	t.Helper()
	var d RuntimeResourcePtyDataFrame
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	return d.RuntimeResourcePtyData
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
