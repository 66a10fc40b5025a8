package home

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestPrepareRuntimeDirCreatesMissingDirectoryWith0700(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "a", "b", "agentd")
	if _, err := PrepareRuntimeDir(dir); err != nil {
		t.Fatal(err)
	}
	assertMode(t, dir, 0o700)
	// A second call accepts what the first made.
	if _, err := PrepareRuntimeDir(dir); err != nil {
		t.Fatal(err)
	}
}

func TestPrepareRuntimeDirTightensALooseDirectoryHoldingOnlyAgentdsFiles(t *testing.T) {
	for _, mode := range []os.FileMode{0o750, 0o755, 0o701, 0o770} {
		dir := filepath.Join(t.TempDir(), "rt")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"h1f2e3.sock", "h1f2e3.json", ".h1f2e3.json4011", "h1f2e3-w-3kq9x.sock"} {
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		loose, err := PrepareRuntimeDir(dir)
		if err != nil || loose != mode {
			t.Fatalf("mode %04o: PrepareRuntimeDir = %04o, %v; want %04o, nil", mode, loose, err, mode)
		}
		assertMode(t, dir, 0o700)
		if loose, err := PrepareRuntimeDir(dir); loose != 0 || err != nil {
			t.Fatalf("again: %04o, %v; want 0, nil", loose, err)
		}
	}
}

func TestPrepareRuntimeDirRefusesALooseDirectoryHoldingOtherFilesWithoutChangingIt(t *testing.T) {
	for _, name := range []string{"notes.txt", "h1f2e3.sock.bak", ".cache"} {
		dir := filepath.Join(t.TempDir(), "rt")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := PrepareRuntimeDir(dir)
		want := "runtime directory " + dir + " has mode 0755 and holds " + name + ", which is not agentd's"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v; want one containing %q", err, want)
		}
		assertMode(t, dir, 0o755)
	}
}

func TestPrepareRuntimeDirRefusesALooseDirectoryHoldingAFileOfAnotherUID(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to chown a file to another uid")
	}
	dir := filepath.Join(t.TempDir(), "rt")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(dir, "h1f2e3.json")
	if err := os.WriteFile(planted, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(planted, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := PrepareRuntimeDir(dir)
	if err == nil || !strings.Contains(err.Error(), "holds h1f2e3.json, owned by uid 65534") {
		t.Fatalf("err = %v; want one naming the file and its owner", err)
	}
	assertMode(t, dir, 0o777)
}

func TestPrepareRuntimeDirRefusesDirectoryOwnedByAnotherUID(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to chown a directory to another uid")
	}
	dir := filepath.Join(t.TempDir(), "rt")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := PrepareRuntimeDir(dir)
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Fatalf("err = %v; want one naming %s and its owner", err, dir)
	}
}

func TestPrepareRuntimeDirRefusesNonDirectoryAndSymlink(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := PrepareRuntimeDir(file); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("regular file: err = %v", err)
	}
	target := filepath.Join(base, "target")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := PrepareRuntimeDir(link); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("symlink: err = %v", err)
	}
}

func TestPrepareHomeCreatesMissingHomeWith0700(t *testing.T) {
	home := filepath.Join(t.TempDir(), "state", "agentd")
	if err := PrepareHome(home); err != nil {
		t.Fatal(err)
	}
	assertMode(t, home, 0o700)
	if err := PrepareHome(home); err != nil {
		t.Fatal(err)
	}
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s has mode %s; want %s", path, octal(got), octal(want))
	}
}

func octal(m os.FileMode) string {
	const digits = "01234567"
	p := uint32(m.Perm())
	return string([]byte{'0', digits[p>>6&7], digits[p>>3&7], digits[p&7]})
}

// assertNoDotFiles fails when dir holds a file whose name starts with a dot
// or a leftover temporary file.
func assertNoDotFiles(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") || strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("%s holds %s", dir, e.Name())
		}
	}
}
