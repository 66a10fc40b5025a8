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
	if err := PrepareRuntimeDir(dir); err != nil {
		t.Fatal(err)
	}
	assertMode(t, dir, 0o700)
	// A second call accepts what the first made.
	if err := PrepareRuntimeDir(dir); err != nil {
		t.Fatal(err)
	}
}

func TestPrepareRuntimeDirRefusesLooseDirectoryWithoutChangingIt(t *testing.T) {
	for _, mode := range []os.FileMode{0o750, 0o755, 0o701, 0o770} {
		dir := filepath.Join(t.TempDir(), "rt")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		err := PrepareRuntimeDir(dir)
		if err == nil {
			t.Fatalf("mode %04o accepted", mode)
		}
		want := "runtime directory " + dir + " has mode " + octal(mode)
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
		assertMode(t, dir, mode)
	}
}

func TestPrepareRuntimeDirRefusesGroupReadableDirectoryNaming0750(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rt")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	err := PrepareRuntimeDir(dir)
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "0750") {
		t.Fatalf("err = %v; want one naming %s and 0750", err, dir)
	}
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
	err := PrepareRuntimeDir(dir)
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
	if err := PrepareRuntimeDir(file); err == nil || !strings.Contains(err.Error(), "not a directory") {
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
	if err := PrepareRuntimeDir(link); err == nil || !strings.Contains(err.Error(), "symbolic link") {
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
