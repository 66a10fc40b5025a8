package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/proc"
)

func bash(t *testing.T, env *Env, command string, timeout int) Result {
	t.Helper()
	a := map[string]any{"command": command}
	if timeout != 0 {
		a["timeout_seconds"] = timeout
	}
	return run(t, bashTool{}, env, args(t, a))
}

// livePIDsInGroup lists the processes of group pgid that are running
// (zombies, which init may never reap, are left out).
func livePIDsInGroup(t *testing.T, pgid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc to inspect process groups: %v", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		s, err := proc.ReadStat(pid)
		if err != nil {
			continue // it ended meanwhile
		}
		if s.PGRP == pgid && !s.Exited() {
			pids = append(pids, pid)
		}
	}
	return pids
}

var groupLine = regexp.MustCompile(`pg (\d+) child (\d+)`)

// groupOf finds the "pg PGID child PID" line a test command printed.
func groupOf(t *testing.T, out string) (pgid, child int) {
	t.Helper()
	m := groupLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the command did not report its process group: %q", out)
	}
	pgid, _ = strconv.Atoi(m[1])
	child, _ = strconv.Atoi(m[2])
	return pgid, child
}

// mustBeGone fails the test unless every process of the group, and the
// background child, is gone or at least dying: the tool sends SIGKILL
// before it returns, but the kernel ends a process a little later.
func mustBeGone(t *testing.T, pgid, child int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := livePIDsInGroup(t, pgid)
		if len(pids) == 0 && !proc.Running(child) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v of group %d outlived the call", pids, pgid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBashRunsInTheWorkingDirectoryAndReportsTheExitCode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := bash(t, &Env{Cwd: dir}, "pwd; echo out; echo err >&2; exit 3", 0)
	got := mustOK(t, r) // a non-zero exit is the model's to judge
	want := dir + "\nout\nerr\nexit code 3"
	if got != want {
		t.Errorf("content = %q, want %q", got, want)
	}
}

func TestBashSaysSoWhenThereIsNoOutput(t *testing.T) {
	t.Parallel()
	got := mustOK(t, bash(t, &Env{Cwd: t.TempDir()}, "true", 0))
	if got != "(no output)\nexit code 0" {
		t.Errorf("content = %q", got)
	}
}

func TestBashGivesTheCommandAnEmptyStdin(t *testing.T) {
	t.Parallel()
	got := mustOK(t, bash(t, &Env{Cwd: t.TempDir()}, "cat; read line; echo read=$?", 0))
	if got != "read=1\nexit code 0" {
		t.Errorf("content = %q", got)
	}
}

func TestBashReportsAShellKilledByASignal(t *testing.T) {
	t.Parallel()
	got := mustOK(t, bash(t, &Env{Cwd: t.TempDir()}, "echo before; kill -KILL $$", 0))
	if got != "before\nkilled by signal 9 (killed)" {
		t.Errorf("content = %q", got)
	}
}

func TestBashThatCannotStartIsAnError(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "gone")
	mustFail(t, bash(t, &Env{Cwd: missing}, "echo hi", 0), "bash: cannot start", "no such file or directory")
}

func TestBashDoesNotStartWhenTheContextIsAlreadyDone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := bashTool{}.Run(ctx, &Env{Cwd: dir}, []byte(`{"command": "touch made"}`))
	mustFail(t, r, "not started")
	if _, err := os.Stat(filepath.Join(dir, "made")); err == nil {
		t.Error("the command ran")
	}
}

func TestBashTimeoutKillsTheWholeProcessGroup(t *testing.T) {
	t.Parallel()
	r := bash(t, &Env{Cwd: t.TempDir()}, `sleep 1000 & echo "pg $$ child $!"; sleep 30; echo never`, 1)
	mustFail(t, r, "timed out after 1s", "killed")
	if strings.Contains(r.Content, "never") {
		t.Errorf("the command ran to its end: %q", r.Content)
	}
	pgid, child := groupOf(t, r.Content)
	mustBeGone(t, pgid, child)
}

func TestBashTimeoutKillsProcessesThatIgnoreSIGTERM(t *testing.T) {
	t.Parallel()
	r := bash(t, &Env{Cwd: t.TempDir()}, `trap "" TERM; sleep 1000 & echo "pg $$ child $!"; sleep 30`, 1)
	mustFail(t, r, "timed out after 1s")
	pgid, child := groupOf(t, r.Content)
	mustBeGone(t, pgid, child)
}

func TestBashCancellationKillsTheWholeProcessGroup(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var mu sync.Mutex
	var seen strings.Builder
	env := &Env{Cwd: t.TempDir(), Progress: func(chunk string) {
		mu.Lock()
		defer mu.Unlock()
		seen.WriteString(chunk)
		if groupLine.MatchString(seen.String()) {
			cancel(errors.New("turn interrupted"))
		}
	}}
	r := bashTool{}.Run(ctx, env, []byte(`{"command": "sleep 1000 & echo \"pg $$ child $!\"; sleep 30; echo never"}`))
	mustFail(t, r, "interrupted (turn interrupted)", "killed")
	if strings.Contains(r.Content, "never") {
		t.Errorf("the command ran to its end: %q", r.Content)
	}
	pgid, child := groupOf(t, r.Content)
	mustBeGone(t, pgid, child)
}

func TestBashEndsBackgroundProcessesLeftWhenTheCommandExits(t *testing.T) {
	t.Parallel()
	for _, command := range []string{
		`sleep 1000 & echo "pg $$ child $!"`,                       // holds the output open
		`sleep 1000 >/dev/null 2>&1 & echo "pg $$ child $!"`,       // does not
		`trap "" TERM; sleep 1000 & echo "pg $$ child $!"; exit 4`, // ignores SIGTERM
	} {
		r := bash(t, &Env{Cwd: t.TempDir()}, command, 0)
		got := mustOK(t, r)
		if !strings.HasSuffix(got, "\nexit code 0") && !strings.HasSuffix(got, "\nexit code 4") {
			t.Errorf("%s: content = %q", command, got)
		}
		pgid, child := groupOf(t, got)
		mustBeGone(t, pgid, child)
	}
}

func TestBashKeepsTheStartAndEndOfLongOutputAndStreamsAllOfIt(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	streamed := 0
	var start strings.Builder
	env := &Env{Cwd: t.TempDir(), Progress: func(chunk string) {
		mu.Lock()
		defer mu.Unlock()
		if start.Len() < 11 {
			start.WriteString(chunk)
		}
		streamed += len(chunk)
	}}
	// 6 + 50000*5 + 4 bytes of output.
	r := bash(t, env, `printf 'START\n'; yes line | head -n 50000; printf 'END\n'`, 0)
	got := mustOK(t, r)
	total := 6 + 50000*5 + 4
	if streamed != total {
		t.Errorf("Progress received %d bytes, want %d", streamed, total)
	}
	if !strings.HasPrefix(start.String(), "START\nline\n") {
		t.Errorf("first chunks = %.20q", start.String())
	}
	omitted := total - 2*bashKeep
	if !strings.Contains(got, fmt.Sprintf("\n… %d bytes omitted …\n", omitted)) {
		t.Errorf("no marker for %d omitted bytes", omitted)
	}
	if !strings.HasPrefix(got, "START\nline\n") || !strings.HasSuffix(got, "line\nEND\nexit code 0") {
		t.Errorf("content does not keep both ends: %.40q … %q", got, got[len(got)-40:])
	}
	if len(got) > 2*bashKeep+200 {
		t.Errorf("content is %d bytes, over the bound", len(got))
	}
}

func TestBashFallsBackToShWithoutBash(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	bin := t.TempDir()
	if err := os.Symlink(sh, filepath.Join(bin, "sh")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	got := mustOK(t, bash(t, &Env{Cwd: t.TempDir()}, `echo "shell=$0"`, 0))
	if got != "shell=sh\nexit code 0" {
		t.Errorf("content = %q", got)
	}

	t.Setenv("PATH", t.TempDir()) // neither bash nor sh
	mustFail(t, bash(t, &Env{Cwd: t.TempDir()}, "echo hi", 0), "bash: cannot start sh")
}

func TestCompleteUTF8NeverSplitsACharacter(t *testing.T) {
	euro := []byte("a€") // € is 3 bytes
	for n, want := range []int{0, 1, 1, 1, 4} {
		if got := completeUTF8(euro[:n]); got != want {
			t.Errorf("completeUTF8(%q) = %d, want %d", euro[:n], got, want)
		}
	}
	if got := completeUTF8([]byte{'a', 0xff}); got != 2 {
		t.Errorf("an invalid byte is passed on whole, got %d", got)
	}
}

func TestHeadTailDropsCharactersCutAtItsEdges(t *testing.T) {
	h := &headTail{keep: 4}
	h.Write([]byte("ab€"))                   // head: "ab" + 2 bytes of €
	h.Write([]byte(strings.Repeat("x", 10))) // omitted
	h.Write([]byte("€yz"))                   // tail: the last 2 bytes of € and "yz"
	got := h.String()
	want := "ab\n… 16 bytes omitted …\nyz"
	if got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	small := &headTail{keep: 4}
	small.Write([]byte("abc"))
	small.Write([]byte("def"))
	if got := small.String(); got != "abcdef" {
		t.Errorf("String() of short output = %q", got)
	}
}

func TestBashStopsWaitingForOutputHeldByAProcessThatLeftTheGroup(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	r := bash(t, &Env{Cwd: t.TempDir()}, `setsid sleep 1000 & echo "escaped $!"`, 0)
	got := mustOK(t, r)
	m := regexp.MustCompile(`escaped (\d+)`).FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("content = %q", got)
	}
	pid, _ := strconv.Atoi(m[1])
	// Out of the group's reach, it is the test's to end.
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if !strings.HasSuffix(got, "\nexit code 0") {
		t.Errorf("content = %q", got)
	}
}

func TestBashRefusesAPTYInTheForegroundAndABackgroundRunWithoutResources(t *testing.T) {
	env := &Env{Cwd: t.TempDir()}
	mustFail(t, run(t, bashTool{}, env, `{"command":"top","pty":true}`), "bash: pty goes with background")
	mustFail(t, run(t, bashTool{}, env, `{"command":"sleep 1","background":true}`), "bash: this session cannot run commands in the background")
	mustFail(t, run(t, bashOutputTool{}, env, `{"ref":"shell-1"}`), "bash_output: this session has no background runs")
	mustFail(t, run(t, bashStopTool{}, env, `{}`), `bash_stop: argument "ref" is required`)
}

func TestACancelledCommandSaysInterruptedNotGosWords(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := bashTool{}.Run(ctx, &Env{Cwd: t.TempDir()}, []byte(`{"command": "echo never"}`))
	mustFail(t, r, "not started: interrupted")
	if strings.Contains(r.Content, "context") {
		t.Errorf("the result speaks Go: %q", r.Content)
	}
}
