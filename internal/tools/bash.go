package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/proc"
)

// Bounds of the bash tool.
const (
	bashDefaultTimeout = 120 // seconds
	bashMaxTimeout     = 600 // seconds
	// bashKeep is how much of the start and of the end of a command's
	// output is kept; what lies between is counted, not kept.
	bashKeep = 32 << 10
	// bashGrace is how long processes have to end after SIGTERM before
	// they get SIGKILL.
	bashGrace = 2 * time.Second
	// bashDrain is how long, once the command's process group is gone, the
	// tool still waits for output from processes that left the group while
	// holding its output open.
	bashDrain = time.Second
)

type bashArgs struct {
	Command        string `json:"command"`
	TimeoutSeconds int    `json:"timeout_seconds"`
	Background     bool   `json:"background"`
	PTY            bool   `json:"pty"`
}

var bashSchema = object(props{
	"command": nonEmpty("The command line, run with bash -c."),
	"timeout_seconds": integer(fmt.Sprintf("Seconds before the command is killed (default %d, at most %d).",
		bashDefaultTimeout, bashMaxTimeout), 1, bashMaxTimeout).withDefault(bashDefaultTimeout),
	"background": boolean("Start the command as a background run that outlives this turn (a dev server, " +
		"a test watcher) and return its ref at once, instead of waiting for it. People attached to the " +
		"session see it. Read it with bash_output, stop it with bash_stop.").withDefault(false),
	"pty": boolean("With background: run the command on a pseudo-terminal, for a program that wants " +
		"one (a full-screen tool, a REPL); bash_output then shows its screen.").withDefault(false),
}, "command")

var bashSpec = makeSpec("bash", fmt.Sprintf(
	"Run a shell command with bash -c in the session's working directory and return its combined "+
		"stdout and stderr followed by its exit status. Each call starts a fresh shell: cd, variables "+
		"and aliases do not carry over, so chain dependent steps with &&. Stdin is empty, so the command "+
		"must not wait for input. The command is killed after timeout_seconds (default %d, at most %d), "+
		"together with every process it started; background processes it leaves running are ended when "+
		"it exits. Output longer than %d KiB keeps its first and last %d KiB. A non-zero exit status is "+
		"reported, not treated as a failure of the tool. Prefer read, ls, find and grep for looking at files. "+
		"For a command that must keep running (a server, a watcher), set background: it starts and returns at once.",
	bashDefaultTimeout, bashMaxTimeout, 2*bashKeep>>10, bashKeep>>10), bashSchema)

type bashTool struct{}

func (bashTool) Spec() llm.ToolSpec { return bashSpec() }

// ReadOnly is false: a command can change anything.
func (bashTool) ReadOnly() bool { return false }

func (bashTool) Run(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a bashArgs
	if bad, ok := decode("bash", bashSchema, raw, &a); !ok {
		return bad
	}
	switch {
	case a.Background:
		return startBackground(env, a.Command, a.PTY)
	case a.PTY:
		return failf("bash", "pty goes with background: a PTY runs as a background run")
	}
	timeout := time.Duration(a.TimeoutSeconds) * time.Second
	if a.TimeoutSeconds == 0 {
		timeout = bashDefaultTimeout * time.Second
	}
	return runShell(ctx, env, a.Command, timeout)
}

// shell returns the shell commands are run with: bash, or sh without it.
func shell() string {
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "sh"
}

// runShell runs command in its own process group with stdin from /dev/null
// and stdout and stderr into one pipe, until it exits, the timeout passes
// or ctx is done. Whatever way it ends, every process left in its group is
// ended (SIGTERM, then SIGKILL after bashGrace), and no goroutine of the
// call outlives it.
func runShell(ctx context.Context, env *Env, command string, timeout time.Duration) Result {
	if err := ctx.Err(); err != nil {
		return failf("bash", "not started: %v", context.Cause(ctx))
	}
	sh := shell()
	pr, pw, err := os.Pipe()
	if err != nil {
		return failf("bash", "cannot start %s: %v", sh, err)
	}
	cmd := exec.Command(sh, "-c", command)
	cmd.Dir = env.Cwd
	cmd.Env = env.Environ
	cmd.Stdout, cmd.Stderr = pw, pw // one pipe keeps stdout and stderr in order
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	pw.Close() // the children hold their own copies
	if err != nil {
		pr.Close()
		return failf("bash", "cannot start %s in %s: %s", sh, env.Cwd, describe(err))
	}
	pgid := cmd.Process.Pid

	var wg sync.WaitGroup
	out := &headTail{keep: bashKeep}
	readDone := make(chan struct{})
	wg.Go(func() {
		defer close(readDone)
		copyOutput(pr, out, env.Progress)
	})
	exited := make(chan error, 1)
	wg.Go(func() { exited <- cmd.Wait() })

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var waitErr error
	var ending string // why the tool ended the command, if it did
	killed := false   // whether the group was sent SIGKILL already
	select {
	case waitErr = <-exited:
	case <-timer.C:
		ending = fmt.Sprintf("timed out after %ds; the command and the processes it started were killed", int(timeout/time.Second))
		killed, waitErr = terminate(pgid, exited)
	case <-ctx.Done():
		ending = fmt.Sprintf("interrupted (%v); the command and the processes it started were killed", context.Cause(ctx))
		killed, waitErr = terminate(pgid, exited)
	}
	// The shell is gone; end what it left behind in its group. The group
	// id cannot be reused while any of its members remains.
	if killed {
		signalGroup(pgid, syscall.SIGKILL) // a process forked meanwhile
	} else if signalGroup(pgid, syscall.SIGTERM) {
		awaitGroupEnd(pgid, readDone, bashGrace)
		signalGroup(pgid, syscall.SIGKILL)
	}
	// A process that moved to another group may still hold the pipe open:
	// stop waiting for it after a while.
	select {
	case <-readDone:
	case <-time.After(bashDrain):
		_ = pr.SetReadDeadline(time.Now())
		<-readDone
	}
	wg.Wait()
	pr.Close()

	var b strings.Builder
	if text := out.String(); text == "" {
		b.WriteString("(no output)\n")
	} else {
		b.WriteString(text)
		if !strings.HasSuffix(text, "\n") {
			b.WriteByte('\n')
		}
	}
	if ending != "" {
		b.WriteString(ending)
		return Result{Content: b.String(), IsError: true}
	}
	b.WriteString(exitStatus(cmd.ProcessState, waitErr))
	return Result{Content: b.String()}
}

// terminate ends the shell's process group (SIGTERM, then SIGKILL after
// bashGrace) and returns whether SIGKILL was needed and the shell's wait
// error.
func terminate(pgid int, exited <-chan error) (killed bool, err error) {
	signalGroup(pgid, syscall.SIGTERM)
	grace := time.NewTimer(bashGrace)
	defer grace.Stop()
	select {
	case err := <-exited:
		return false, err
	case <-grace.C:
	}
	signalGroup(pgid, syscall.SIGKILL)
	return true, <-exited
}

// awaitGroupEnd waits until the group has no process left and the output
// pipe is closed, or until grace has passed.
func awaitGroupEnd(pgid int, readDone <-chan struct{}, grace time.Duration) {
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	select {
	case <-readDone:
	case <-deadline.C:
		return
	}
	// Nothing signals the end of processes that are not our children:
	// poll.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for proc.GroupRunning(pgid) {
		select {
		case <-tick.C:
		case <-deadline.C:
			return
		}
	}
}

// signalGroup sends sig to every process of the group and reports whether
// the group had any (zombies included).
func signalGroup(pgid int, sig syscall.Signal) bool {
	return syscall.Kill(-pgid, sig) == nil
}

// exitStatus describes how the shell ended.
func exitStatus(ps *os.ProcessState, waitErr error) string {
	if ps == nil {
		return fmt.Sprintf("could not wait for the command: %v", waitErr)
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
	}
	return fmt.Sprintf("exit code %d", ps.ExitCode())
}

// copyOutput reads the command's output until EOF or a read deadline,
// keeping it in out and passing it on to progress, if set, in chunks that
// do not split a UTF-8 character.
func copyOutput(r io.Reader, out *headTail, progress func(string)) {
	buf := make([]byte, 32<<10)
	var pending []byte // the start of a character cut off by the last read
	for {
		n, err := r.Read(buf)
		if n > 0 {
			out.Write(buf[:n])
			if progress != nil {
				pending = append(pending, buf[:n]...)
				if whole := completeUTF8(pending); whole > 0 {
					progress(string(pending[:whole]))
					pending = append(pending[:0], pending[whole:]...)
				}
			}
		}
		if err != nil {
			if progress != nil && len(pending) > 0 {
				progress(string(pending))
			}
			return
		}
	}
}

// completeUTF8 returns the length of the longest prefix of p that does not
// end inside a UTF-8 character.
func completeUTF8(p []byte) int {
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if utf8.FullRune(p[i:]) {
				return len(p)
			}
			return i
		}
	}
	return len(p)
}

// headTail keeps the first and the last keep bytes written to it and
// counts the rest. It is used by one goroutine at a time.
type headTail struct {
	keep  int
	head  []byte
	tail  []byte // the last bytes past head; trimmed to keep when read
	total int64
}

func (h *headTail) Write(p []byte) {
	h.total += int64(len(p))
	if room := h.keep - len(h.head); room > 0 {
		n := min(room, len(p))
		h.head = append(h.head, p[:n]...)
		p = p[n:]
	}
	h.tail = append(h.tail, p...)
	if len(h.tail) > 2*h.keep {
		h.tail = append(h.tail[:0], h.tail[len(h.tail)-h.keep:]...)
	}
}

// String returns what was kept, with a marker where bytes were left out.
// Characters cut in two at the edges of the kept parts are dropped; other
// invalid UTF-8 becomes U+FFFD.
func (h *headTail) String() string {
	tail := h.tail
	if len(tail) > h.keep {
		tail = tail[len(tail)-h.keep:]
	}
	omitted := h.total - int64(len(h.head)) - int64(len(tail))
	if omitted == 0 {
		return strings.ToValidUTF8(string(h.head)+string(tail), "\uFFFD")
	}
	head := h.head[:completeUTF8(h.head)]
	for i := 0; i < utf8.UTFMax-1 && len(tail) > 0 && !utf8.RuneStart(tail[0]); i++ {
		tail = tail[1:]
	}
	omitted = h.total - int64(len(head)) - int64(len(tail))
	return strings.ToValidUTF8(string(head), "\uFFFD") +
		fmt.Sprintf("\n… %d bytes omitted …\n", omitted) +
		strings.ToValidUTF8(string(tail), "\uFFFD")
}
