package credentials

import (
	"encoding/json"
	"testing"
)

// FuzzDecode: any bytes decode to a valid file or an error, never a panic,
// and a file that decodes encodes and decodes again to the same keys.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"version":1,"keys":{"openai":"sk-0123456789"}}`))
	f.Add([]byte(`{"version":1,"keys":{}}`))
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"keys":{"a":"b"},"version":1} `))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Decode(data)
		if err != nil {
			return
		}
		for name, key := range file.Keys {
			if CheckProvider(name) != nil || CheckKey(key) != nil {
				t.Fatalf("decoded a bad entry %q", name)
			}
		}
		again, err := json.Marshal(file)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode(again)
		if err != nil || len(back.Keys) != len(file.Keys) {
			t.Fatalf("re-decoding: %v", err)
		}
	})
}
