package tools

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadNumbersLinesLikeCatN(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"sub/a.txt": "alpha\n\tbeta\n\ngamma"})
	got := mustOK(t, run(t, readTool{}, &Env{Cwd: dir}, `{"path": "sub/a.txt"}`))
	want := "     1\talpha\n     2\t\tbeta\n     3\t\n     4\tgamma\n"
	if got != want {
		t.Errorf("content = %q, want %q", got, want)
	}
	abs := filepath.Join(dir, "sub", "a.txt")
	if got := mustOK(t, run(t, readTool{}, &Env{Cwd: "/"}, args(t, map[string]any{"path": abs}))); got != want {
		t.Errorf("absolute path: content = %q", got)
	}
}

func TestReadFromAnOffsetSaysWhereToContinue(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var b strings.Builder
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	writeFiles(t, dir, map[string]string{"ten.txt": b.String()})
	env := &Env{Cwd: dir}
	got := mustOK(t, run(t, readTool{}, env, `{"path": "ten.txt", "offset": 4, "limit": 3}`))
	want := "     4\tline 4\n     5\tline 5\n     6\tline 6\n… the file goes on; continue with offset 7\n"
	if got != want {
		t.Errorf("content = %q, want %q", got, want)
	}
	got = mustOK(t, run(t, readTool{}, env, `{"path": "ten.txt", "offset": 9}`))
	if got != "     9\tline 9\n    10\tline 10\n" {
		t.Errorf("content = %q", got)
	}
	mustFail(t, run(t, readTool{}, env, `{"path": "ten.txt", "offset": 11}`), "offset 11 is past the end of ten.txt, which has 10 lines")
}

func TestReadReadsAtMostTheDefaultLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"many.txt": strings.Repeat("x\n", readDefaultLimit+5)})
	got := mustOK(t, run(t, readTool{}, &Env{Cwd: dir}, `{"path": "many.txt"}`))
	if n := strings.Count(got, "\tx\n"); n != readDefaultLimit {
		t.Errorf("read %d lines, want %d", n, readDefaultLimit)
	}
	if !strings.HasSuffix(got, fmt.Sprintf("continue with offset %d\n", readDefaultLimit+1)) {
		t.Errorf("content ends %q", got[len(got)-60:])
	}
}

func TestReadCutsLongLinesAndBoundsItsOutput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	long := strings.Repeat("é", readMaxLine) // 2 bytes each
	writeFiles(t, dir, map[string]string{
		"long.txt": "short\n" + long + "\nend\n",
		"big.txt":  strings.Repeat(strings.Repeat("y", 1000)+"\n", 1000),
	})
	env := &Env{Cwd: dir}
	got := mustOK(t, run(t, readTool{}, env, `{"path": "long.txt"}`))
	lines := strings.Split(got, "\n")
	if len(lines) != 4 || !strings.HasSuffix(lines[1], fmt.Sprintf(" … (line cut: %d more bytes)", readMaxLine)) || lines[2] != "     3\tend" {
		t.Fatalf("content = %.200q", got)
	}
	if kept := strings.Count(lines[1], "é"); kept != readMaxLine/2 {
		t.Errorf("kept %d characters of the long line, want %d", kept, readMaxLine/2)
	}

	got = mustOK(t, run(t, readTool{}, env, `{"path": "big.txt"}`))
	if len(got) > readMaxOutput+200 {
		t.Errorf("output is %d bytes, over the bound", len(got))
	}
	n := strings.Count(got, "\n") - 1
	if !strings.HasSuffix(got, fmt.Sprintf("output limit of 256 KiB reached; continue with offset %d\n", n+1)) {
		t.Errorf("content ends %q", got[len(got)-80:])
	}
}

func TestReadRefusesDirectoriesBinaryFilesAndMissingFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"d/x":     "",
		"bin.dat": "ELF\x00\x01\x02",
		"late":    strings.Repeat("a", sniffBytes+10) + "\x00",
	})
	env := &Env{Cwd: dir}
	mustFail(t, run(t, readTool{}, env, `{"path": "d"}`), "read: d is a directory; use ls")
	mustFail(t, run(t, readTool{}, env, `{"path": "bin.dat"}`), "read: bin.dat is a binary file")
	mustFail(t, run(t, readTool{}, env, `{"path": "nope.txt"}`), "read: nope.txt: no such file or directory")
	// A NUL past the sniffed start does not make a file binary.
	mustOK(t, run(t, readTool{}, env, `{"path": "late"}`))
	if _, err := os.Stat("/dev/null"); err == nil {
		mustFail(t, run(t, readTool{}, env, `{"path": "/dev/null"}`), "is not a regular file")
	}
}

func TestReadOfAnEmptyFileSaysSo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"e": ""})
	if got := mustOK(t, run(t, readTool{}, &Env{Cwd: dir}, `{"path": "e"}`)); got != "(e is empty)" {
		t.Errorf("content = %q", got)
	}
}

func TestWriteCreatesParentDirectoriesWithMode0644(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	got := mustOK(t, run(t, writeTool{}, &Env{Cwd: dir}, `{"path": "a/b/c.txt", "content": "hi\n"}`))
	if got != "created a/b/c.txt: wrote 3 bytes" {
		t.Errorf("content = %q", got)
	}
	p := filepath.Join(dir, "a", "b", "c.txt")
	if readFile(t, p) != "hi\n" {
		t.Errorf("file holds %q", readFile(t, p))
	}
	if info, _ := os.Stat(p); info.Mode().Perm() != 0o644 {
		t.Errorf("mode = %v, want 0644", info.Mode().Perm())
	}
	noLeftovers(t, filepath.Join(dir, "a", "b"), "c.txt")
}

func TestWriteReplacesAFileKeepingItsMode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(p, []byte("old"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o751); err != nil {
		t.Fatal(err)
	}
	got := mustOK(t, run(t, writeTool{}, &Env{Cwd: "/elsewhere"}, args(t, map[string]any{"path": p, "content": "#!/bin/sh\n"})))
	if got != fmt.Sprintf("replaced %s: wrote 10 bytes", p) {
		t.Errorf("content = %q", got)
	}
	if readFile(t, p) != "#!/bin/sh\n" {
		t.Errorf("file holds %q", readFile(t, p))
	}
	if info, _ := os.Stat(p); info.Mode().Perm() != 0o751 {
		t.Errorf("mode = %v, want 0751", info.Mode().Perm())
	}
	noLeftovers(t, dir, "run.sh")
}

func TestWriteThroughASymlinkReplacesItsTarget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"real.txt": "old"})
	if err := os.Symlink("real.txt", filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	mustOK(t, run(t, writeTool{}, &Env{Cwd: dir}, `{"path": "link.txt", "content": "new"}`))
	if readFile(t, filepath.Join(dir, "real.txt")) != "new" {
		t.Error("the link's target was not written")
	}
	if info, err := os.Lstat(filepath.Join(dir, "link.txt")); err != nil || info.Mode()&fs.ModeSymlink == 0 {
		t.Error("the link was replaced by a file")
	}
}

func TestWriteRefusesADirectoryAndAPathThroughAFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"d/x": "", "f": "file"})
	env := &Env{Cwd: dir}
	mustFail(t, run(t, writeTool{}, env, `{"path": "d", "content": "x"}`), "write: cannot write d: it is a directory")
	mustFail(t, run(t, writeTool{}, env, `{"path": "f/g.txt", "content": "x"}`), "write: cannot write f/g.txt")
	if readFile(t, filepath.Join(dir, "f")) != "file" {
		t.Error("f was changed")
	}
}

func TestWriteOfEmptyContentMakesAnEmptyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustOK(t, run(t, writeTool{}, &Env{Cwd: dir}, `{"path": "empty", "content": ""}`))
	if readFile(t, filepath.Join(dir, "empty")) != "" {
		t.Error("file is not empty")
	}
}

func TestEditReplacesAUniqueString(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "main.go")
	if err := os.WriteFile(p, []byte("package main\n\nfunc main() {\n\tprintln(1)\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got := mustOK(t, run(t, editTool{}, &Env{Cwd: dir}, `{"path": "main.go", "old_string": "println(1)", "new_string": "println(2)"}`))
	if got != "edited main.go: replaced 1 occurrence at line 4" {
		t.Errorf("content = %q", got)
	}
	if readFile(t, p) != "package main\n\nfunc main() {\n\tprintln(2)\n}\n" {
		t.Errorf("file holds %q", readFile(t, p))
	}
	if info, _ := os.Stat(p); info.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600 kept", info.Mode().Perm())
	}
	noLeftovers(t, dir, "main.go")
}

func TestEditRefusesAStringThatIsAbsentOrNotUnique(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const text = "a = 1\nb = 1\nc = 1\n"
	writeFiles(t, dir, map[string]string{"v.txt": text})
	env := &Env{Cwd: dir}
	mustFail(t, run(t, editTool{}, env, `{"path": "v.txt", "old_string": "d = 1", "new_string": "d = 2"}`),
		"edit: old_string not found in v.txt")
	mustFail(t, run(t, editTool{}, env, `{"path": "v.txt", "old_string": "= 1", "new_string": "= 2"}`),
		"edit: old_string appears 3 times in v.txt; add context or set replace_all")
	mustFail(t, run(t, editTool{}, env, `{"path": "v.txt", "old_string": "= 1", "new_string": "= 1"}`),
		"old_string and new_string are the same")
	mustFail(t, run(t, editTool{}, env, `{"path": "v.txt", "old_string": "", "new_string": "x"}`),
		`argument "old_string" must not be empty`)
	mustFail(t, run(t, editTool{}, env, `{"path": "w.txt", "old_string": "a", "new_string": "b"}`),
		"edit: w.txt: no such file or directory")
	mustFail(t, run(t, editTool{}, env, `{"path": ".", "old_string": "a", "new_string": "b"}`),
		"edit: . is a directory")
	if got := readFile(t, filepath.Join(dir, "v.txt")); got != text {
		t.Errorf("a refused edit changed the file: %q", got)
	}
}

func TestEditReplaceAllReplacesEveryOccurrence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"v.txt": "a = 1\nb = 1\nc = 1\n"})
	got := mustOK(t, run(t, editTool{}, &Env{Cwd: dir}, `{"path": "v.txt", "old_string": " = 1", "new_string": "", "replace_all": true}`))
	if got != "edited v.txt: replaced 3 occurrences, the first at line 1" {
		t.Errorf("content = %q", got)
	}
	if got := readFile(t, filepath.Join(dir, "v.txt")); got != "a\nb\nc\n" {
		t.Errorf("file holds %q", got)
	}
}

// noLeftovers fails the test if dir holds anything but the named files
// (a temporary file left by an atomic write, say).
func noLeftovers(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Errorf("%s holds %v, want %v", dir, got, names)
	}
}
