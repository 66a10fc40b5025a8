package transcript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// clock is a fixed time for records and set-aside names.
var clock = time.Date(2026, 1, 2, 3, 4, 5, 600700800, time.UTC)

func fixedNow() time.Time { return clock }

func newPath(t *testing.T) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "transcript.jsonl")
}

func openLog(t *testing.T, path string) *Log {
	t.Helper()
	l, err := Open(path, Options{Now: fixedNow})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func mustAppend(t *testing.T, l *Log, typ, turnID string, data any) Record {
	t.Helper()
	rec, err := l.Append(typ, turnID, data)
	if err != nil {
		t.Fatalf("Append(%q): %v", typ, err)
	}
	return rec
}

func mustClose(t *testing.T, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// goodLines returns n record lines as Append writes them.
func goodLines(t *testing.T, n int) []byte {
	t.Helper()
	path := newPath(t)
	l := openLog(t, path)
	for i := range n {
		mustAppend(t, l, "user_message", "t1", map[string]any{"text": strings.Repeat("x", i)})
	}
	mustClose(t, l)
	return readFile(t, path)
}

func TestAppendWritesOneLinePerRecord(t *testing.T) {
	path := newPath(t)
	l := openLog(t, path)
	mustAppend(t, l, "turn_start", "t1", map[string]string{"text": "hi\nthere"})
	mustAppend(t, l, "note", "", json.RawMessage(` { "a" : [1, 2] } `))
	mustClose(t, l)

	want := `{"seq":1,"time":"2026-01-02T03:04:05.6007008Z","type":"turn_start","turnId":"t1","data":{"text":"hi\nthere"}}` + "\n" +
		`{"seq":2,"time":"2026-01-02T03:04:05.6007008Z","type":"note","data":{"a":[1,2]}}` + "\n"
	if got := string(readFile(t, path)); got != want {
		t.Errorf("file:\n%s\nwant:\n%s", got, want)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestReopenContinuesTheSequence(t *testing.T) {
	path := newPath(t)
	l, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var appended []Record
	appended = append(appended, mustAppend(t, l, "user_message", "t1", map[string]string{"text": "hello"}))
	appended = append(appended, mustAppend(t, l, "assistant_message", "t1", json.RawMessage(`"hi"`)))
	rec, err := l.AppendSync("turn_end", "t1", nil)
	if err != nil {
		t.Fatal(err)
	}
	appended = append(appended, rec)
	for i, r := range appended {
		if r.Seq != uint64(i+1) {
			t.Errorf("record %d has seq %d", i, r.Seq)
		}
	}
	mustClose(t, l)

	l = openLog(t, path)
	if len(l.Repairs()) != 0 || l.Damaged() != nil {
		t.Fatalf("reopen: repairs %v, damage %v", l.Repairs(), l.Damaged())
	}
	if l.Last() != 3 {
		t.Fatalf("Last after reopen = %d, want 3", l.Last())
	}
	got, err := l.Read(1, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		w := appended[i]
		if r.Seq != w.Seq || !r.Time.Equal(w.Time) || r.Type != w.Type || r.TurnID != w.TurnID || !bytes.Equal(r.Data, w.Data) {
			t.Errorf("record %d read back as %+v, appended as %+v", i, r, w)
		}
	}
	if string(got[2].Data) != "null" {
		t.Errorf("nil data read back as %s", got[2].Data)
	}
	if r := mustAppend(t, l, "turn_start", "t2", 1); r.Seq != 4 {
		t.Errorf("append after reopen got seq %d, want 4", r.Seq)
	}
	mustClose(t, l)

	c, err := ReadAll(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Records) != 4 || c.Torn != nil || c.Damaged != nil {
		t.Fatalf("ReadAll: %d records, torn %v, damaged %v", len(c.Records), c.Torn, c.Damaged)
	}
	for i, r := range c.Records {
		if r.Seq != uint64(i+1) {
			t.Errorf("ReadAll record %d has seq %d", i, r.Seq)
		}
	}
}

func TestOpenNeedsTheDirectory(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "missing", "transcript.jsonl"), Options{})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open in a missing directory: %v, want not-exist", err)
	}
}

func TestOpenRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{dir, fifo} {
		if l, err := Open(path, Options{}); err == nil {
			l.Close()
			t.Errorf("Open(%s) succeeded", path)
		}
	}
}

func TestASecondWriterIsRefused(t *testing.T) {
	path := newPath(t)
	l := openLog(t, path)
	if l2, err := Open(path, Options{}); !errors.Is(err, ErrInUse) {
		if err == nil {
			l2.Close()
		}
		t.Fatalf("second Open: %v, want ErrInUse", err)
	}
	mustClose(t, l)
	l2 := openLog(t, path)
	mustClose(t, l2)
}

// holderChildEnv names the transcript a re-executed test binary holds open
// until its stdin closes.
const holderChildEnv = "AGENTD_TRANSCRIPT_TEST_HOLDER"

func holderChild(path string) int {
	l, err := Open(path, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println("open")
	io.Copy(io.Discard, os.Stdin)
	l.Close()
	return 0
}

func TestAWriterInAnotherProcessIsRefusedUntilItExits(t *testing.T) {
	path := newPath(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), holderChildEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "open\n" {
		t.Fatalf("holder said %q, %v", line, err)
	}
	if l, err := Open(path, Options{}); !errors.Is(err, ErrInUse) {
		if err == nil {
			l.Close()
		}
		t.Fatalf("Open while another process holds it: %v, want ErrInUse", err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	mustClose(t, openLog(t, path))
}

func TestAppendRefusesBadRecordsAndWritesNothing(t *testing.T) {
	path := newPath(t)
	l := openLog(t, path)
	mustAppend(t, l, "note", "", 1)
	before := readFile(t, path)

	cases := []struct {
		name string
		typ  string
		data any
		want error
	}{
		{"no type", "", 1, ErrInvalidRecord},
		{"data that does not encode", "note", make(chan int), ErrInvalidRecord},
		{"raw data that is not JSON", "note", json.RawMessage(`{"a":`), ErrInvalidRecord},
		{"a record over the limit", "note", strings.Repeat("x", MaxRecordBytes), ErrTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := l.Append(c.typ, "", c.data)
			if !errors.Is(err, c.want) {
				t.Fatalf("Append: %v, want %v", err, c.want)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the transcript", err)
			}
		})
	}
	if l.Last() != 1 {
		t.Errorf("Last = %d after refused appends, want 1", l.Last())
	}
	if after := readFile(t, path); !bytes.Equal(after, before) {
		t.Errorf("refused appends changed the file:\n%s", after)
	}
	if r := mustAppend(t, l, "note", "", 2); r.Seq != 2 {
		t.Errorf("next append got seq %d, want 2", r.Seq)
	}
}

func TestAClosedLogRefusesEverything(t *testing.T) {
	l := openLog(t, newPath(t))
	mustAppend(t, l, "note", "", 1)
	mustClose(t, l)
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := l.Append("note", "", 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Append: %v", err)
	}
	if err := l.Sync(); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync: %v", err)
	}
	if _, err := l.Read(1, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Read: %v", err)
	}
	if _, err := l.Page(PageRequest{Direction: DirectionOlder, MaxBytes: 100}); !errors.Is(err, ErrClosed) {
		t.Errorf("Page: %v", err)
	}
}

func TestReadRanges(t *testing.T) {
	l := openLog(t, newPath(t))
	for i := range 5 {
		mustAppend(t, l, "note", "", i)
	}
	cases := []struct {
		from, to uint64
		want     []uint64
		err      error
	}{
		{1, 5, []uint64{1, 2, 3, 4, 5}, nil},
		{2, 3, []uint64{2, 3}, nil},
		{4, 4, []uint64{4}, nil},
		{4, 100, []uint64{4, 5}, nil},
		{6, 9, nil, nil},
		{0, 3, nil, ErrOutOfRange},
		{3, 2, nil, ErrOutOfRange},
	}
	for _, c := range cases {
		recs, err := l.Read(c.from, c.to)
		if !errors.Is(err, c.err) {
			t.Errorf("Read(%d, %d): %v, want %v", c.from, c.to, err, c.err)
			continue
		}
		var got []uint64
		for _, r := range recs {
			got = append(got, r.Seq)
			if want := []byte{byte('0' + r.Seq - 1)}; !bytes.Equal(r.Data, want) {
				t.Errorf("seq %d has data %s", r.Seq, r.Data)
			}
		}
		if !equalSeqs(got, c.want) {
			t.Errorf("Read(%d, %d) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}

func equalSeqs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
