package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestALooseRuntimeDirectoryOfTheUsersOwnIsTightened: a runtime directory
// made with mkdir -p (0755) holding only agentd's files gets mode 0700, and
// the command says so once; one holding another file is refused, named,
// and left as it is.
func TestALooseRuntimeDirectoryOfTheUsersOwnIsTightened(t *testing.T) {
	p := newPlace(t)
	if err := os.MkdirAll(p.rundir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p.rundir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := p.run("ls")
	if code != 0 || !strings.Contains(errOut, "runtime directory "+p.rundir+" had mode 0755; set it to 0700") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if fi, err := os.Stat(p.rundir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("runtime directory: %v, %v", fi.Mode(), err)
	}
	if _, errOut, code := p.run("ls"); code != 0 || strings.Contains(errOut, "runtime directory") {
		t.Fatalf("the second command: exit %d: %s", code, errOut)
	}

	q := newPlace(t)
	if err := os.MkdirAll(q.rundir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(q.rundir, "notes.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(q.rundir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = q.run("ls")
	if code != 1 || !strings.Contains(errOut, "has mode 0755 and holds notes.txt, which is not agentd's") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if fi, err := os.Stat(q.rundir); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("runtime directory: %v, %v", fi.Mode(), err)
	}
}
