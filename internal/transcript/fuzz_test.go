package transcript

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// seedLines returns n record lines as Append writes them.
func seedLines(n int) []byte {
	var b []byte
	for i := range n {
		data, _ := json.Marshal(map[string]int{"i": i})
		b, _ = encodeLine(b, uint64(i+1), clock, "note", "t1", data)
	}
	return b
}

// FuzzOpen opens a transcript of any bytes, as a disk may hand back after a
// crash or a foreign write. Open must never fail or panic on content; what
// it reads must be a prefix of the file of records numbered from 1; it may
// only cut a torn tail, kept aside byte for byte; and what it leaves must
// open again with nothing more to repair.
func FuzzOpen(f *testing.F) {
	good := seedLines(3)
	f.Add([]byte{})
	f.Add(good)
	f.Add(append(append([]byte(nil), good...), `{"seq":4,"ti`...))
	f.Add(append(append([]byte(nil), good...), "\n"...))
	f.Add(append(append([]byte(nil), good[:40]...), good...))
	f.Add(bytes.Replace(good, []byte(`"seq":2`), []byte(`"seq":9`), 1))
	f.Add([]byte(`{"seq":1,"time":"2026-01-02T03:04:05Z","type":"x","data":null}` + "\n"))
	f.Add([]byte(`{"SEQ":1,"Time":"2026-01-02T03:04:05Z","type":"x","data":{},"data":1}` + "\n" + "\x00\x00"))

	f.Fuzz(func(t *testing.T, content []byte) {
		path := filepath.Join(t.TempDir(), "transcript.jsonl")
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		seen, err := ReadAll(path)
		if err != nil {
			t.Fatalf("ReadAll: %v", err)
		}
		if got := readFile(t, path); !bytes.Equal(got, content) {
			t.Fatal("ReadAll changed the file")
		}

		l, err := Open(path, Options{Now: fixedNow})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer l.Close()
		last := l.Last()
		if uint64(len(seen.Records)) != last {
			t.Fatalf("ReadAll read %d records, Open %d", len(seen.Records), last)
		}

		// The records are the file's first lines, numbered from 1.
		var prefix []byte
		if last > 0 {
			recs, err := l.Read(1, last)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			for i, r := range recs {
				if r.Seq != uint64(i+1) || r.Type == "" || r.Time.IsZero() || len(r.Data) == 0 {
					t.Fatalf("record %d: %+v", i, r)
				}
			}
			p, err := l.Page(PageRequest{Direction: DirectionNewer, MaxBytes: 1 << 30})
			if err != nil {
				t.Fatalf("Page: %v", err)
			}
			if uint64(len(p.Records)) != last || p.NextCursor != "" {
				t.Fatalf("a page of everything: %d records, next %q", len(p.Records), p.NextCursor)
			}
			for _, r := range p.Records {
				prefix = append(append(prefix, r...), '\n')
			}
		}
		if !bytes.HasPrefix(content, prefix) {
			t.Fatal("the records are not a prefix of the file")
		}
		end := len(prefix)

		reps, damage := l.Repairs(), l.Damaged()
		onDisk := readFile(t, path)
		switch {
		case len(reps) > 0:
			r := reps[0]
			if len(reps) != 1 || damage != nil || r.Offset != int64(end) || r.Bytes != int64(len(content)-end) {
				t.Fatalf("repairs %v, damage %v, records end at %d of %d", reps, damage, end, len(content))
			}
			if seen.Torn == nil || *seen.Torn != r.Tail {
				t.Fatalf("ReadAll saw torn tail %v, Open repaired %v", seen.Torn, r.Tail)
			}
			if !bytes.Equal(onDisk, content[:end]) {
				t.Fatal("the repaired file is not the records")
			}
			if aside := readFile(t, r.SetAside); !bytes.Equal(aside, content[end:]) {
				t.Fatal("the set-aside bytes are not the torn tail")
			}
		case damage != nil:
			if damage.Offset != int64(end) || seen.Damaged == nil || *seen.Damaged != *damage {
				t.Fatalf("damage %v, ReadAll saw %v, records end at %d", damage, seen.Damaged, end)
			}
			if !bytes.Equal(onDisk, content) {
				t.Fatal("a damaged file changed")
			}
		default:
			if end != len(content) || seen.Torn != nil || seen.Damaged != nil {
				t.Fatalf("records end at %d of %d with nothing wrong; ReadAll saw %v, %v", end, len(content), seen.Torn, seen.Damaged)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}

		l2, err := Open(path, Options{Now: fixedNow})
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer l2.Close()
		if len(l2.Repairs()) != 0 || l2.Last() != last {
			t.Fatalf("reopen: repairs %v, last %d, was %d", l2.Repairs(), l2.Last(), last)
		}
		if d2 := l2.Damaged(); (d2 == nil) != (damage == nil) || (d2 != nil && *d2 != *damage) {
			t.Fatalf("reopen: damage %v, was %v", d2, damage)
		}
	})
}
