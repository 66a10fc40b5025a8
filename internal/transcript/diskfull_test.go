package transcript

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
)

// diskFullChildEnv names the transcript a re-executed test binary fills
// under a lowered RLIMIT_FSIZE.
const diskFullChildEnv = "AGENTD_TRANSCRIPT_TEST_DISKFULL"

// diskFullReport is what the child prints on its last line of output.
type diskFullReport struct {
	Acknowledged uint64 // records appended before the limit, and after it was lifted
	Refused      int    // appends refused at the limit
	Error        string // the first refusal's message
}

func diskFullData(seq uint64) map[string]any {
	return map[string]any{"n": seq, "pad": strings.Repeat("p", 100)}
}

// TestAppendOnAFullDiskLeavesTheFileWhole runs appends in a child process
// whose file size limit stops a write part way (EFBIG standing in for
// ENOSPC): each failed append must leave the file ending after a whole
// record, and appends must succeed again once there is room.
func TestAppendOnAFullDiskLeavesTheFileWhole(t *testing.T) {
	path := newPath(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), diskFullChildEnv+"="+path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	out := bytes.TrimSpace(stdout.Bytes())
	var rep diskFullReport
	if err := json.Unmarshal(out[bytes.LastIndexByte(out, '\n')+1:], &rep); err != nil {
		t.Fatalf("child report: %v\n%s", err, out)
	}
	if rep.Refused == 0 {
		t.Fatalf("the child never hit the limit: %+v", rep)
	}
	wantMsg := "appending to transcript " + path + ": file too large"
	if rep.Error != wantMsg {
		t.Errorf("error at the limit %q, want %q", rep.Error, wantMsg)
	}

	l := openLog(t, path)
	if len(l.Repairs()) != 0 || l.Damaged() != nil {
		t.Fatalf("after a full disk: repairs %v, damage %v", l.Repairs(), l.Damaged())
	}
	if l.Last() != rep.Acknowledged {
		t.Fatalf("Last = %d, want the %d acknowledged records", l.Last(), rep.Acknowledged)
	}
	recs, err := l.Read(1, l.Last())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		want, _ := json.Marshal(diskFullData(r.Seq))
		if !bytes.Equal(r.Data, want) {
			t.Errorf("seq %d holds %s, want %s", r.Seq, r.Data, want)
		}
	}
}

// diskFullChild is the child's side of TestAppendOnAFullDiskLeavesTheFileWhole.
func diskFullChild(path string) int {
	if err := fillDisk(path); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func fillDisk(path string) error {
	// Past the limit the kernel sends SIGXFSZ before failing the write.
	signal.Ignore(syscall.SIGXFSZ)
	l, err := Open(path, Options{})
	if err != nil {
		return err
	}
	defer l.Close()
	var rep diskFullReport
	appendOne := func() error {
		_, err := l.Append("note", "t1", diskFullData(l.Last()+1))
		if err == nil {
			rep.Acknowledged++
		}
		return err
	}
	for range 3 {
		if err := appendOne(); err != nil {
			return err
		}
	}
	if err := l.Sync(); err != nil {
		return err
	}
	size := fileSize(path)
	lineLen := size / 3

	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &orig); err != nil {
		return err
	}
	// Room for two and a half more lines: the third write stops part way.
	low := orig
	low.Cur = uint64(size + lineLen*5/2)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &low); err != nil {
		return err
	}
	for range 10 {
		before := fileSize(path)
		err := appendOne()
		if err == nil {
			continue
		}
		if !errors.Is(err, syscall.EFBIG) {
			return fmt.Errorf("append at the limit: %v, want EFBIG", err)
		}
		if rep.Refused == 0 {
			rep.Error = err.Error()
		}
		rep.Refused++
		if after := fileSize(path); after != before {
			return fmt.Errorf("a refused append left the file at %d bytes, it was %d", after, before)
		}
		if recs, err := l.Read(1, l.Last()); err != nil || uint64(len(recs)) != rep.Acknowledged {
			return fmt.Errorf("reading after a refused append: %d records, %v", len(recs), err)
		}
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &orig); err != nil {
		return err
	}
	for range 2 {
		if err := appendOne(); err != nil {
			return fmt.Errorf("append once there is room again: %w", err)
		}
	}
	if err := l.Close(); err != nil {
		return err
	}
	b, _ := json.Marshal(rep)
	fmt.Printf("%s\n", b)
	return nil
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return fi.Size()
}
