package transcript

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// asideName is the first set-aside file of path at the fixed clock.
func asideName(path string, n int) string {
	return path + ".damaged-20260102T030405Z-" + string(rune('0'+n))
}

// tornTails are endings a write cut short, or garbage, can leave after the
// last good line.
var tornTails = []struct {
	name string
	tail string
}{
	{"a partial record", `{"seq":4,"time":"2026-01-02T03:04:05Z","ty`},
	{"a whole record without its newline", `{"seq":4,"time":"2026-01-02T03:04:05Z","type":"note","data":1}`},
	{"a last line that is not JSON", "garbage\n"},
	{"a last line with the wrong shape", `{"seq":4}` + "\n"},
	{"an empty last line", "\n"},
	{"zero bytes", "\x00\x00\x00\x00"},
}

func TestOpenCutsATornTailAndKeepsItsBytesAside(t *testing.T) {
	good := goodLines(t, 3)
	for _, c := range tornTails {
		t.Run(c.name, func(t *testing.T) {
			path := newPath(t)
			writeFile(t, path, append(append([]byte(nil), good...), c.tail...))

			l := openLog(t, path)
			reps := l.Repairs()
			if len(reps) != 1 {
				t.Fatalf("Repairs = %v, want one", reps)
			}
			r := reps[0]
			if r.Offset != int64(len(good)) || r.Bytes != int64(len(c.tail)) || r.Line != 4 || r.Reason == "" {
				t.Errorf("repair %+v, want line 4 at byte %d, %d bytes", r, len(good), len(c.tail))
			}
			if r.SetAside != asideName(path, 1) {
				t.Errorf("set aside in %s, want %s", r.SetAside, asideName(path, 1))
			}
			if got := readFile(t, r.SetAside); string(got) != c.tail {
				t.Errorf("set-aside bytes %q, want %q", got, c.tail)
			}
			if fi, err := os.Stat(r.SetAside); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("set-aside file: %v, %v", fi, err)
			}
			if got := readFile(t, path); !bytes.Equal(got, good) {
				t.Errorf("file after repair:\n%q\nwant:\n%q", got, good)
			}
			if l.Damaged() != nil || l.Last() != 3 {
				t.Fatalf("after repair: damage %v, last %d", l.Damaged(), l.Last())
			}
			if rec := mustAppend(t, l, "note", "", 4); rec.Seq != 4 {
				t.Errorf("append after repair got seq %d", rec.Seq)
			}
			mustClose(t, l)

			l = openLog(t, path)
			if len(l.Repairs()) != 0 || l.Last() != 4 {
				t.Errorf("reopen: repairs %v, last %d", l.Repairs(), l.Last())
			}
		})
	}
}

func TestATornTailNeverOverwritesAnEarlierSetAside(t *testing.T) {
	good := goodLines(t, 2)
	path := newPath(t)
	writeFile(t, asideName(path, 1), []byte("earlier"))
	writeFile(t, path, append(append([]byte(nil), good...), "torn"...))

	l := openLog(t, path)
	if reps := l.Repairs(); len(reps) != 1 || reps[0].SetAside != asideName(path, 2) {
		t.Fatalf("Repairs = %v, want bytes kept in %s", reps, asideName(path, 2))
	}
	if got := readFile(t, asideName(path, 1)); string(got) != "earlier" {
		t.Errorf("earlier set-aside file now holds %q", got)
	}
	if got := readFile(t, asideName(path, 2)); string(got) != "torn" {
		t.Errorf("new set-aside file holds %q", got)
	}
}

// damagedFiles put a bad line before the last one, or a whole record with
// the wrong seq anywhere.
func damagedFiles(t *testing.T) []struct {
	name     string
	content  []byte
	line     int
	offset   int
	readable uint64
	reason   string
} {
	good := goodLines(t, 5)
	lines := bytes.SplitAfter(good, []byte("\n"))[:5]
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	off := func(n int) int { return len(join(lines[:n]...)) }
	seq3as7 := bytes.Replace(lines[2], []byte(`"seq":3`), []byte(`"seq":7`), 1)
	return []struct {
		name     string
		content  []byte
		line     int
		offset   int
		readable uint64
		reason   string
	}{
		{"garbage between records", join(lines[0], lines[1], []byte("garbage\n"), lines[2], lines[3]), 3, off(2), 2, "not a JSON record"},
		{"a torn line between records", join(lines[0], []byte(`{"seq":2,"ti`+"\n"), lines[2]), 2, off(1), 1, "not a JSON record"},
		{"an empty line between records", join(lines[0], lines[1], []byte("\n"), lines[2]), 3, off(2), 2, "not a JSON record"},
		{"a gap in the sequence", join(lines[0], lines[1], lines[3], lines[4]), 3, off(2), 2, "expected seq 3, found seq 4"},
		{"a repeated seq", join(lines[0], lines[1], lines[1], lines[2]), 3, off(2), 2, "expected seq 3, found seq 2"},
		{"a first record that is not seq 1", join(lines[1], lines[2]), 1, 0, 0, "expected seq 1, found seq 2"},
		{"a whole last record with the wrong seq", join(lines[0], lines[1], seq3as7), 3, off(2), 2, "expected seq 3, found seq 7"},
		{"damage followed by a torn tail", join(lines[0], []byte("garbage\n"), lines[2], []byte("torn")), 2, off(1), 1, "not a JSON record"},
	}
}

func TestADamagedLineMakesTheTranscriptReadableUpToItAndRefusesAppends(t *testing.T) {
	for _, c := range damagedFiles(t) {
		t.Run(c.name, func(t *testing.T) {
			path := newPath(t)
			writeFile(t, path, c.content)

			l := openLog(t, path)
			d := l.Damaged()
			if d == nil {
				t.Fatalf("not marked damaged; repairs %v", l.Repairs())
			}
			if d.Line != c.line || d.Offset != int64(c.offset) || !strings.Contains(d.Reason, c.reason) {
				t.Errorf("damage %s, want line %d at byte %d: %s", d, c.line, c.offset, c.reason)
			}
			if len(l.Repairs()) != 0 {
				t.Errorf("repairs %v on a damaged transcript", l.Repairs())
			}
			if l.Last() != c.readable {
				t.Errorf("Last = %d, want %d", l.Last(), c.readable)
			}
			recs, err := l.Read(1, 100)
			if err != nil || uint64(len(recs)) != c.readable {
				t.Errorf("Read: %d records, %v; want %d", len(recs), err, c.readable)
			}
			p, err := l.Page(PageRequest{Direction: DirectionOlder, MaxBytes: 1 << 20})
			if err != nil || uint64(len(p.Records)) != c.readable {
				t.Errorf("Page: %d records, %v; want %d", len(p.Records), err, c.readable)
			}
			_, err = l.Append("note", "", 1)
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), path) {
				t.Errorf("Append on a damaged transcript: %v", err)
			}
			if err := l.Sync(); err != nil {
				t.Errorf("Sync: %v", err)
			}
			mustClose(t, l)
			if got := readFile(t, path); !bytes.Equal(got, c.content) {
				t.Errorf("the damaged file changed:\n%q\nwant:\n%q", got, c.content)
			}
			assertOnlyFile(t, path)
		})
	}
}

func TestALineOverTheLimitIsDamage(t *testing.T) {
	good := goodLines(t, 2)
	lines := bytes.SplitAfter(good, []byte("\n"))
	long := append(bytes.Repeat([]byte("x"), MaxRecordBytes+10), '\n')
	path := newPath(t)
	writeFile(t, path, bytes.Join([][]byte{lines[0], long, lines[1]}, nil))

	c, err := ReadAll(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Damaged == nil || c.Damaged.Line != 2 || !strings.Contains(c.Damaged.Reason, "longer than") || len(c.Records) != 1 {
		t.Fatalf("ReadAll: damage %v, %d records", c.Damaged, len(c.Records))
	}

	writeFile(t, path, bytes.Join([][]byte{lines[0], long}, nil))
	l := openLog(t, path)
	if reps := l.Repairs(); len(reps) != 1 || reps[0].Bytes != int64(len(long)) || l.Last() != 1 {
		t.Fatalf("a long last line: repairs %v, last %d", reps, l.Last())
	}
}

// assertOnlyFile fails when anything but path is in its directory.
func assertOnlyFile(t *testing.T, path string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != filepath.Base(path) {
			t.Errorf("unexpected file %s beside the transcript", e.Name())
		}
	}
}

func TestReadAllNeverModifiesTheFile(t *testing.T) {
	good := goodLines(t, 3)
	type file struct {
		name    string
		content []byte
		records int
		torn    bool
		damaged bool
	}
	files := []file{
		{"a whole transcript", good, 3, false, false},
		{"an empty transcript", nil, 0, false, false},
	}
	for _, c := range tornTails {
		files = append(files, file{"torn: " + c.name, append(append([]byte(nil), good...), c.tail...), 3, true, false})
	}
	for _, c := range damagedFiles(t) {
		files = append(files, file{"damaged: " + c.name, c.content, int(c.readable), false, true})
	}
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, f := range files {
		t.Run(f.name, func(t *testing.T) {
			path := newPath(t)
			writeFile(t, path, f.content)
			if err := os.Chtimes(path, old, old); err != nil {
				t.Fatal(err)
			}
			c, err := ReadAll(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Records) != f.records || (c.Torn != nil) != f.torn || (c.Damaged != nil) != f.damaged {
				t.Errorf("ReadAll: %d records, torn %v, damaged %v", len(c.Records), c.Torn, c.Damaged)
			}
			for i, r := range c.Records {
				if r.Seq != uint64(i+1) {
					t.Errorf("record %d has seq %d", i, r.Seq)
				}
			}
			if f.torn && (c.Torn.Offset != int64(len(good)) || c.Torn.Bytes != int64(len(f.content)-len(good))) {
				t.Errorf("torn tail %+v", c.Torn)
			}
			if got := readFile(t, path); !bytes.Equal(got, f.content) {
				t.Errorf("ReadAll changed the file")
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if !fi.ModTime().Equal(old) {
				t.Errorf("ReadAll touched the file: modified %v", fi.ModTime())
			}
			assertOnlyFile(t, path)
		})
	}
}

func TestReadAllOfAMissingFile(t *testing.T) {
	if _, err := ReadAll(newPath(t)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadAll of a missing file: %v", err)
	}
}

func TestReadAllWhileTheWriterHoldsTheFile(t *testing.T) {
	path := newPath(t)
	l := openLog(t, path)
	mustAppend(t, l, "note", "", 1)
	c, err := ReadAll(path)
	if err != nil || len(c.Records) != 1 {
		t.Fatalf("ReadAll: %v, %v", c, err)
	}
}
