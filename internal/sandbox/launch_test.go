package sandbox_test

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/internal/sandbox"
	"github.com/agentd-dev/agentd/protocol"
)

// TestCommandsStartedTogetherRunInTheirWallsAsChildrenOfTheCaller: one
// launcher starts several commands: each runs in its own directory with
// its own environment and files, walled in (the home unreadable, nothing
// written outside the workspace), in a process group of its own, a child
// of the caller, which waits for it; a command that is not there or not a
// program fails alone.
func TestCommandsStartedTogetherRunInTheirWallsAsChildrenOfTheCaller(t *testing.T) {
	p := newPlace(t)
	pol := p.policy(protocol.SandboxWorkspace)
	notAProgram := filepath.Join(p.outside, "notes")
	if err := os.WriteFile(notAProgram, []byte("echo hello\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	script := `echo "$(pwd) $N $TMPDIR $PPID $(cut -d' ' -f5 /proc/$$/stat) $$"; cat ` + filepath.Join(p.home, "credentials.json") +
		` && echo READ; echo x > ` + filepath.Join(p.outside, "written") + ` && echo WROTE; echo err >&2`
	dirs := []string{p.workspace, p.outside, p.tmp}
	var cmds []sandbox.Launch
	var outs []*os.File
	for i, dir := range dirs {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		defer w.Close()
		outs = append(outs, r)
		cmds = append(cmds, sandbox.Launch{Name: "sh", Args: []string{"-c", script}, Env: []string{"N=" + strconv.Itoa(i), "TMPDIR=/elsewhere"}, Dir: dir, Stdin: nil, Stdout: w, Stderr: w})
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	for i := range cmds {
		cmds[i].Stdin = devnull
	}
	cmds = append(cmds,
		sandbox.Launch{Name: "no-such-program-here", Dir: p.workspace, Stdin: devnull, Stdout: devnull, Stderr: devnull},
		sandbox.Launch{Name: notAProgram, Dir: p.workspace, Stdin: devnull, Stdout: devnull, Stderr: devnull},
	)
	procs, errs := pol.StartAll(cmds)
	for i := range dirs {
		if errs[i] != nil {
			t.Fatalf("command %d did not start: %v", i, errs[i])
		}
	}
	for i, bad := range []string{"executable file not found", "neither an ELF program"} {
		if k := len(dirs) + i; procs[k] != nil || errs[k] == nil || !strings.Contains(errs[k].Error(), bad) {
			t.Errorf("command %d: %v, %v; want it refused with %q", k, procs[k], errs[k], bad)
		}
	}
	for i, dir := range dirs {
		cmds[i].Stdout.Close()
		b, _ := io.ReadAll(outs[i])
		st, err := procs[i].Wait()
		if err != nil || !st.Exited() {
			t.Fatalf("waiting for command %d: %v, %v", i, st, err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		f := strings.Fields(lines[0])
		want := []string{dir, strconv.Itoa(i), p.tmp, strconv.Itoa(os.Getpid()), strconv.Itoa(procs[i].Pid), strconv.Itoa(procs[i].Pid)}
		if strings.Join(f, " ") != strings.Join(want, " ") {
			t.Errorf("command %d said %q, want %q (directory, N, TMPDIR, parent, group, pid)", i, lines[0], want)
		}
		if out := string(b); strings.Contains(out, "READ") || strings.Contains(out, "WROTE") || !strings.Contains(out, "err") {
			t.Errorf("command %d read the home or wrote outside the workspace, or lost its stderr: %q", i, out)
		}
	}
	if left := children(t); len(left) > 0 {
		t.Fatalf("processes %v are left unreaped", left)
	}
}
