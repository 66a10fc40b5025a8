package protocol

import (
	"encoding/json"
	"testing"
)

// FuzzAppendJSONString: the literal reads back as the text json.Marshal's
// does (invalid UTF-8 replaced alike), and is valid JSON.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain text\r\n", "\x1b[1mbold\x1b[m \"q\" \\ \t é 世界 \u2028\u2029", "cut \xe4\xb8", "\xff\xfe\x00\x7f", "<&>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lit := AppendJSONString([]byte("x"), s)[1:]
		fromBytes := AppendJSONString(nil, []byte(s))
		if string(lit) != string(fromBytes) {
			t.Fatalf("%q: %s from a string, %s from bytes", s, lit, fromBytes)
		}
		var got, want string
		if err := json.Unmarshal(lit, &got); err != nil {
			t.Fatalf("%q: %s is not a JSON string: %v", s, lit, err)
		}
		m, _ := json.Marshal(s)
		if err := json.Unmarshal(m, &want); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("%q: %s reads %q, json.Marshal's %s reads %q", s, lit, got, m, want)
		}
	})
}
