package catalog

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

const fuzzValidHeader = `{
  "schemaVersion": 1,
  "id": "k3v9m2x7qa",
  "title": "agentd",
  "cwd": "/home/me/src/agentd",
  "model": "anthropic/claude-opus-4-6",
  "thinking": "off",
  "approval": "ask",
  "createdAt": "2030-01-02T03:04:05.000000006Z",
  "updatedAt": "2030-01-02T03:04:05.000000006Z",
  "lastActivityAt": "2030-01-02T04:00:00+01:00",
  "archived": false,
  "metadataRevision": 3
}
`

// FuzzDecodeHeader feeds decodeHeader what a header.json might hold. It must
// never panic; a header it accepts must meet the catalog's rules, encode, and
// decode again to the same header; and a folder holding the bytes must load,
// damaged or not, without error.
func FuzzDecodeHeader(f *testing.F) {
	f.Add([]byte(fuzzValidHeader))
	f.Add([]byte(`{}`))
	f.Add([]byte(``))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"schemaVersion":1,"id":"a","title":"t","cwd":"/","thinking":"high","approval":"read-only","createdAt":"0001-01-01T00:00:01Z","updatedAt":"9999-12-31T23:59:59Z","lastActivityAt":"0000-12-31T23:00:00-01:00","metadataRevision":18446744073709551615}`))
	f.Add([]byte(`{"schemaVersion":2,"id":"a"}`))
	f.Add([]byte(`{"schemaVersion":1,"id":"../etc","cwd":"/"}`))
	f.Add([]byte(`{"schemaVersion":1,"id":"a","title":"\u0000","cwd":"/"}`))
	f.Add([]byte(`{"schemaVersion":1,"id":"a","model":"anthropic","cwd":"/"}`))
	f.Add([]byte("{\"schemaVersion\":1,\"id\":\"a\",\"title\":\"\xff\xfe\"}"))
	f.Add([]byte(`{"schemaVersion":1} trailing`))
	f.Add([]byte(`{"schemaVersion":1,"id":"a","cwd":"/","thinking":"off","approval":"ask","plugins":["/k","/k/"],"createdAt":"2030-01-02T03:04:05Z","updatedAt":"2030-01-02T03:04:05Z","lastActivityAt":"2030-01-02T03:04:05Z","metadataRevision":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHeader(b)
		if err != nil {
			if !reflect.DeepEqual(h, Header{}) {
				t.Fatalf("a refused header came back non-zero: %+v", h)
			}
		} else {
			if err := h.check(); err != nil {
				t.Fatalf("accepted header breaks a rule: %v", err)
			}
			if h.Damaged || h.Damage != "" {
				t.Fatalf("decoding set damage: %+v", h)
			}
			enc, err := encodeHeader(h)
			if err != nil {
				t.Fatalf("accepted header does not encode: %v (%+v)", err, h)
			}
			again, err := decodeHeader(enc)
			if err != nil {
				t.Fatalf("re-encoded header %s does not decode: %v", enc, err)
			}
			if !sameHeader(again, h) {
				t.Fatalf("round trip changed the header:\n%+v\n%+v", h, again)
			}
		}

		if len(b) > 4096 {
			return // keep disk work small
		}
		dir := filepath.Join(t.TempDir(), "s1")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, headerName), b, 0o600); err != nil {
			t.Fatal(err)
		}
		loaded, claims := (&Catalog{log: slog.New(slog.DiscardHandler)}).loadHeader(dir, "s1")
		if loaded.ID != "s1" {
			t.Fatalf("loaded id %q, want the folder's name", loaded.ID)
		}
		if wantClaims := err == nil && h.ID != "s1"; (claims != "") != wantClaims || (wantClaims && claims != h.ID) {
			t.Fatalf("a header naming %q (err %v) claims %q", h.ID, err, claims)
		}
		if loaded.Damaged == (err == nil && h.ID == "s1") {
			t.Fatalf("loaded %+v from a header that decodes with err %v", loaded, err)
		}
		if loaded.Damaged && loaded.Damage == "" {
			t.Fatal("a damaged entry without a reason")
		}
		if got, _ := os.ReadFile(filepath.Join(dir, headerName)); !bytes.Equal(got, b) {
			t.Fatal("loading changed the header file")
		}
	})
}

func TestTheFuzzSeedHeaderDecodes(t *testing.T) {
	h, err := decodeHeader([]byte(fuzzValidHeader))
	if err != nil || h.ID != "k3v9m2x7qa" || h.MetadataRevision != 3 {
		t.Fatalf("decodeHeader = %+v, %v", h, err)
	}
}
