package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tree is a small project used by the search tests.
var tree = map[string]string{
	"go.mod":                      "module example\n",
	"main.go":                     "package main\n\nfunc main() {\n\tRun()\n}\n",
	"cmd/tool/main.go":            "package main\n\n// Run the tool.\nfunc main() {}\n",
	"internal/run/run.go":         "package run\n\nfunc Run() error { return nil }\n",
	"internal/run/run_test.go":    "package run\n\nfunc TestRun() {}\n",
	".hidden/notes.md":            "run it\n",
	".git/config":                 "[core] Run = yes\n",
	"node_modules/x/index.go":     "func Run() {}\n",
	"assets/logo.png":             "\x89PNG\x00Run\x00",
	"docs/README.md":              "# Run\nHow to run.\n",
	"docs/deep/er/still/deep.txt": "RUN\n",
}

func TestLsListsSortedEntriesWithDirectoriesMarked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, tree)
	if err := os.Symlink("docs", filepath.Join(dir, "manual")); err != nil {
		t.Fatal(err)
	}
	env := &Env{Cwd: dir}
	want := ".git/\n.hidden/\nassets/\ncmd/\ndocs/\ngo.mod\ninternal/\nmain.go\nmanual/\nnode_modules/\n"
	if got := mustOK(t, run(t, lsTool{}, env, `{}`)); got != want {
		t.Errorf("ls of the working directory = %q, want %q", got, want)
	}
	if got := mustOK(t, run(t, lsTool{}, env, `{"path": "internal/run"}`)); got != "run.go\nrun_test.go\n" {
		t.Errorf("ls internal/run = %q", got)
	}
	if got := mustOK(t, run(t, lsTool{}, &Env{Cwd: "/"}, args(t, map[string]any{"path": filepath.Join(dir, "cmd")}))); got != "tool/\n" {
		t.Errorf("ls of an absolute path = %q", got)
	}
}

func TestLsRefusesFilesAndMissingPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, tree)
	env := &Env{Cwd: dir}
	mustFail(t, run(t, lsTool{}, env, `{"path": "go.mod"}`), "ls: go.mod is not a directory")
	mustFail(t, run(t, lsTool{}, env, `{"path": "nowhere"}`), "ls: nowhere: no such file or directory")
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := mustOK(t, run(t, lsTool{}, env, `{"path": "empty"}`)); got != "(empty is empty)" {
		t.Errorf("ls of an empty directory = %q", got)
	}
}

func TestLsShowsAtMostItsBound(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := range lsMax + 7 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := mustOK(t, run(t, lsTool{}, &Env{Cwd: dir}, `{}`))
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != lsMax+1 || lines[0] != "f00000" || lines[lsMax-1] != fmt.Sprintf("f%05d", lsMax-1) || lines[lsMax] != "… and 7 more" {
		t.Errorf("got %d lines, first %q, last %q", len(lines), lines[0], lines[len(lines)-1])
	}
}

func TestFindMatchesGlobsWithDoubleStarsSkippingGitAndNodeModules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, tree)
	env := &Env{Cwd: dir}
	cases := []struct{ args, want string }{
		{`{"pattern": "*.go"}`, "cmd/tool/main.go\ninternal/run/run.go\ninternal/run/run_test.go\nmain.go\n"},
		{`{"pattern": "**/*.go"}`, "cmd/tool/main.go\ninternal/run/run.go\ninternal/run/run_test.go\nmain.go\n"},
		{`{"pattern": "internal/**/*_test.go"}`, "internal/run/run_test.go\n"},
		{`{"pattern": "./cmd/**"}`, "cmd/\ncmd/tool/\ncmd/tool/main.go\n"},
		{`{"pattern": "docs/**/deep.txt"}`, "docs/deep/er/still/deep.txt\n"},
		{`{"pattern": "run"}`, "internal/run/\n"},
		{`{"pattern": "*.md"}`, ".hidden/notes.md\ndocs/README.md\n"},
		{`{"pattern": "main.go", "path": "cmd"}`, "tool/main.go\n"},
		{`{"pattern": "[mr]*.go", "path": "internal"}`, "run/run.go\nrun/run_test.go\n"},
		{`{"pattern": "*.rs"}`, "no paths under . match *.rs"},
	}
	for _, c := range cases {
		if got := mustOK(t, run(t, findTool{}, env, c.args)); got != c.want {
			t.Errorf("find %s = %q, want %q", c.args, got, c.want)
		}
	}
}

func TestFindRefusesBadPatternsAndPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, tree)
	env := &Env{Cwd: dir}
	mustFail(t, run(t, findTool{}, env, `{"pattern": "[a-"}`), "find: malformed pattern")
	mustFail(t, run(t, findTool{}, env, `{"pattern": "/etc/*"}`), "find: the pattern must be relative")
	mustFail(t, run(t, findTool{}, env, `{"pattern": "*", "path": "go.mod"}`), "find: go.mod is not a directory")
	mustFail(t, run(t, findTool{}, env, `{"pattern": "*", "path": "gone"}`), "find: gone: no such file or directory")
}

func TestFindShowsAtMostItsBound(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := range findMax + 3 {
		p := filepath.Join(dir, fmt.Sprintf("d%d", i%10), fmt.Sprintf("f%05d.txt", i))
		writeFiles(t, dir, map[string]string{filepath.ToSlash(p[len(dir)+1:]): ""})
	}
	got := mustOK(t, run(t, findTool{}, &Env{Cwd: dir}, `{"pattern": "*.txt"}`))
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != findMax+1 || lines[findMax] != "… and 3 more; narrow the pattern or the path" {
		t.Errorf("got %d lines ending %q", len(lines), lines[len(lines)-1])
	}
	if lines[0] != "d0/f00000.txt" {
		t.Errorf("first line %q", lines[0])
	}
}

func TestFindStopsWhenTheContextIsDone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, tree)
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("turn interrupted"))
	r := findTool{}.Run(ctx, &Env{Cwd: dir}, []byte(`{"pattern": "*"}`))
	mustFail(t, r, "find: stopped: turn interrupted")
}

func TestGrepFindsMatchingLinesSkippingBinaryGitAndNodeModules(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, tree)
	env := &Env{Cwd: dir}
	cases := []struct{ args, want string }{
		{`{"pattern": "Run"}`, "cmd/tool/main.go:3: // Run the tool.\n" +
			"docs/README.md:1: # Run\n" +
			"internal/run/run.go:3: func Run() error { return nil }\n" +
			"internal/run/run_test.go:3: func TestRun() {}\n" +
			"main.go:4: \tRun()\n"},
		{`{"pattern": "^run", "ignore_case": true, "path": "docs"}`, "docs/deep/er/still/deep.txt:1: RUN\n"},
		{`{"pattern": "Run\\(\\)", "glob": "*_test.go"}`, "internal/run/run_test.go:3: func TestRun() {}\n"},
		{`{"pattern": "run", "glob": "docs/**"}`, "docs/README.md:2: How to run.\n"},
		{`{"pattern": "func", "path": "internal/run/run.go"}`, "internal/run/run.go:3: func Run() error { return nil }\n"},
		{`{"pattern": "package", "path": "./cmd/"}`, "cmd/tool/main.go:1: package main\n"},
		{`{"pattern": "nothing here"}`, "no matches for nothing here in .\n"},
	}
	for _, c := range cases {
		if got := mustOK(t, run(t, grepTool{}, env, c.args)); got != c.want {
			t.Errorf("grep %s = %q, want %q", c.args, got, c.want)
		}
	}
	abs := filepath.Join(dir, "cmd")
	got := mustOK(t, run(t, grepTool{}, &Env{Cwd: "/"}, args(t, map[string]any{"pattern": "package", "path": abs})))
	if got != filepath.Join(abs, "tool", "main.go")+":1: package main\n" {
		t.Errorf("grep of an absolute path = %q", got)
	}
}

func TestGrepRefusesBadPatternsAndPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFiles(t, dir, tree)
	env := &Env{Cwd: dir}
	mustFail(t, run(t, grepTool{}, env, `{"pattern": "a(b"}`), "grep: bad pattern", "missing closing )")
	mustFail(t, run(t, grepTool{}, env, `{"pattern": "a", "glob": "[x"}`), "grep: glob: malformed pattern")
	mustFail(t, run(t, grepTool{}, env, `{"pattern": "a", "path": "gone"}`), "grep: gone: no such file or directory")
}

func TestGrepStopsAtItsBoundAndCutsLongLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var b strings.Builder
	for i := range grepMax + 50 {
		fmt.Fprintf(&b, "hit %d\n", i)
	}
	writeFiles(t, dir, map[string]string{
		"a.txt": b.String(),
		"b.txt": "hit " + strings.Repeat("z", 3*grepShowLine) + "\n",
	})
	env := &Env{Cwd: dir}
	got := mustOK(t, run(t, grepTool{}, env, `{"pattern": "hit"}`))
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != grepMax+1 || lines[grepMax] != "… stopped after 200 matches; narrow the pattern, path or glob" {
		t.Errorf("got %d lines ending %q", len(lines), lines[len(lines)-1])
	}
	got = mustOK(t, run(t, grepTool{}, env, `{"pattern": "hit z", "path": "b.txt"}`))
	if want := "b.txt:1: hit " + strings.Repeat("z", grepShowLine-4) + " …\n"; got != want {
		t.Errorf("long line shown as %q", got)
	}
}
