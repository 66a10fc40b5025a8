package atomicfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
)

// writers are the package's two ways to write, which keep the same
// promises but durability.
var writers = []struct {
	name  string
	write func(string, []byte, fs.FileMode) error
}{{"Write", Write}, {"WriteDurable", WriteDurable}}

func TestWriteReplacesTheFileWithTheModeGivenWhateverTheUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	for _, w := range writers {
		t.Run(w.name, func(t *testing.T) { testReplace(t, w.write) })
	}
}

func testReplace(t *testing.T, write func(string, []byte, fs.FileMode) error) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	for _, c := range []struct {
		data string
		perm fs.FileMode
	}{{"first", 0o644}, {"second, longer than the first", 0o600}, {"3", 0o755 | fs.ModeSetgid}} {
		if err := write(path, []byte(c.data), c.perm); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil || string(b) != c.data {
			t.Fatalf("after writing %q: %q, %v", c.data, b, err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode() & (fs.ModePerm | fs.ModeSetgid); got != c.perm {
			t.Errorf("mode %v; want %v", got, c.perm)
		}
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"f.json"}) {
		t.Errorf("the directory holds %v", names)
	}
}

func TestWriteReplacesASymbolicLinkRatherThanItsTarget(t *testing.T) {
	for _, w := range writers {
		t.Run(w.name, func(t *testing.T) { testReplaceLink(t, w.write) })
	}
}

func testReplaceLink(t *testing.T, write func(string, []byte, fs.FileMode) error) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := write(link, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "kept" {
		t.Errorf("the link's target became %q", b)
	}
	if fi, err := os.Lstat(link); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("link: %v, %v; want a regular file", fi, err)
	}
}

func TestAReaderSeesTheOldContentOrTheNewNeverAPart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	versions := [][]byte{bytes.Repeat([]byte("a"), 64<<10), bytes.Repeat([]byte("b"), 96<<10)}
	if err := Write(path, versions[0], 0o600); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		for i := range 200 {
			if err := Write(path, versions[i%2], 0o600); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for reading := true; reading; {
		select {
		case <-done:
			reading = false
		default:
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, versions[0]) && !bytes.Equal(b, versions[1]) {
			t.Fatalf("read %d bytes that are neither version", len(b))
		}
	}
	wg.Wait()
}

func TestAFailedWriteLeavesNothingBehind(t *testing.T) {
	for _, w := range writers {
		t.Run(w.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := w.write(filepath.Join(dir, "no", "f"), []byte("x"), 0o600); err == nil {
				t.Fatal("a write into a missing directory succeeded")
			}
			// A directory in the way fails the rename, after the data is written.
			if err := os.Mkdir(filepath.Join(dir, "d"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "d", "x"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := w.write(filepath.Join(dir, "d"), []byte("x"), 0o600); err == nil {
				t.Fatal("a write over a directory succeeded")
			}
			if names := dirNames(t, dir); !slices.Equal(names, []string{"d"}) {
				t.Errorf("the directory holds %v", names)
			}
		})
	}
}

func TestRemoveLeftoversRecognisesTheTemporaryFilesOfBothWrites(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	// A write cut off before its rename, the way a crash would leave it.
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+"*")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if !isTemp(filepath.Base(f.Name()), ".f") {
		t.Fatalf("%s is not taken for a leftover", f.Name())
	}
	if err := RemoveLeftovers(path); err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("left %v", names)
	}
}

func TestRemoveLeftoversRemovesOnlyTheTemporaryFilesOfThatPath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "header.json")
	keep := []string{"header.json", ".header.json", ".header.json.bak", ".header.jsonx1", "header.json1", ".other.json12", ".header.json7d"}
	gone := []string{".header.json1", ".header.json5577006791947779410"}
	for _, name := range append(slices.Clone(keep), gone...) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, ".header.json2"), 0o700); err != nil {
		t.Fatal(err)
	}
	keep = append(keep, ".header.json2") // a directory is not a leftover
	if err := RemoveLeftovers(path); err != nil {
		t.Fatal(err)
	}
	slices.Sort(keep)
	if names := dirNames(t, dir); !slices.Equal(names, keep) {
		t.Errorf("left %v; want %v", names, keep)
	}
	if err := RemoveLeftovers(filepath.Join(dir, "missing", "f")); err != nil {
		t.Errorf("RemoveLeftovers in a missing directory: %v", err)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestOpenRefusesASymbolicLinkAndLeavesItsTargetAlone(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("theirs"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		flag int
	}{{"to append", os.O_WRONLY | os.O_APPEND | os.O_CREATE}, {"to read", os.O_RDONLY}, {"to truncate", os.O_WRONLY | os.O_TRUNC}} {
		link := filepath.Join(dir, "link")
		os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		f, err := Open(link, c.flag, 0o600)
		if err == nil {
			f.Close()
		}
		if !errors.Is(err, ErrSymlink) {
			t.Errorf("Open %s through a link: %v, want ErrSymlink", c.name, err)
		}
	}
	// A dangling link creates nothing where it points.
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "created"), dangling); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dangling, os.O_WRONLY|os.O_CREATE, 0o600); !errors.Is(err, ErrSymlink) {
		t.Errorf("Open through a dangling link: %v, want ErrSymlink", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "theirs" {
		t.Errorf("the target holds %q", b)
	}
	if _, err := os.Lstat(filepath.Join(dir, "created")); err == nil {
		t.Error("a file was created through the dangling link")
	}
	// A file of its own opens as os.OpenFile opens it.
	f, err := Open(filepath.Join(dir, "own"), os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}
