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

var bashSchema = sync.OnceValue(func() *schema {
	return object(props{
		"command": nonEmpty("The command line, run with bash -c."),
		"timeout_seconds": integer(fmt.Sprintf("Seconds before the command is killed (default %d, at most %d).",
			bashDefaultTimeout, bashMaxTimeout), 1, bashMaxTimeout).withDefault(bashDefaultTimeout),
		"background": boolean("Start the command as a background run that outlives this turn (a dev server, " +
			"a test watcher) and return its ref at once, instead of waiting for it. People attached to the " +
			"session see it. Read it with bash_output, stop it with bash_stop.").withDefault(false),
		"pty": boolean("With background: run the command on a pseudo-terminal, for a program that wants " +
			"one (a full-screen tool, a REPL); bash_output then shows its screen.").withDefault(false),
	}, "command")
})

var bashSpec = makeSpec("bash", bashSchema, func() string {
	return fmt.Sprintf(
		"Run a shell command with bash -c in the session's working directory and return its combined "+
			"stdout and stderr followed by its exit status. Each call starts a fresh shell: cd, variables "+
			"and aliases do not carry over, so chain dependent steps with &&. Stdin is empty, so the command "+
			"must not wait for input. The command is killed after timeout_seconds (default %d, at most %d), "+
			"together with every process it started; background processes it leaves running are ended when "+
			"it exits. Output longer than %d KiB keeps its first and last %d KiB. A non-zero exit status is "+
			"reported, not treated as a failure of the tool. Prefer read, ls, find and grep for looking at files. "+
			"For a command that must keep running (a server, a watcher), set background: it starts and returns at once.",
		bashDefaultTimeout, bashMaxTimeout, 2*bashKeep>>10, bashKeep>>10)
})

type bashTool struct{}

func (bashTool) Spec() llm.ToolSpec { return bashSpec() }

// ReadOnly is false: a command can change anything.
func (bashTool) ReadOnly() bool { return false }

func (bashTool) Run(ctx context.Context, env *Env, raw json.RawMessage) Result {
	var a bashArgs
	if bad, ok := decode("bash", bashSchema(), raw, &a); !ok {
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
	if env.Background != nil {
		return runResource(ctx, env, a.Command, timeout)
	}
	return runShell(ctx, env, a.Command, timeout)
}

// runResource runs command as one of the session's shell runs, listed
// and logged like every resource, and waits for it until it exits, the
// timeout passes or ctx is done; then it is stopped (SIGTERM to its
// process group, SIGKILL after a grace).
func runResource(ctx context.Context, env *Env, command string, timeout time.Duration) Result {
	if err := ctx.Err(); err != nil {
		return failf("bash", "not started: %s", why(ctx))
	}
	var mu sync.Mutex
	sink := newOutputSink(env.Progress)
	done := false // once set, output (of a process that left its group) is dropped
	r, exited, err := env.Background.Run(command, func(p []byte) {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			sink.write(p)
		}
	})
	if err != nil {
		return failf("bash", "cannot start: %v", err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	ending := ""
	select {
	case <-exited:
	case <-timer.C:
		ending = timedOut(timeout)
	case <-ctx.Done():
		ending = interrupted(ctx)
	}
	if ending != "" {
		if _, err := env.Background.Stop(r.Ref); err != nil {
			ending += fmt.Sprintf(" (stopping %s: %v)", r.Ref, err)
		}
	}
	<-exited
	run, err := env.Background.Read(r.Ref)
	mu.Lock()
	defer mu.Unlock()
	done = true
	sink.flush()
	switch {
	case ending != "":
		return sink.result(ending, true)
	case err != nil || run.ExitCode == nil:
		return sink.result(fmt.Sprintf("could not learn how %s ended: %v", r.Ref, err), true)
	}
	return sink.result(fmt.Sprintf("exit code %d", *run.ExitCode), false)
}

// timedOut and interrupted say why the tool ended a command before it
// exited.
func timedOut(timeout time.Duration) string {
	return fmt.Sprintf("timed out after %ds; the command and the processes it started were killed", int(timeout/time.Second))
}

func interrupted(ctx context.Context) string {
	w := why(ctx)
	if w != "interrupted" {
		w = "interrupted (" + w + ")"
	}
	return w + "; the command and the processes it started were killed"
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
		return failf("bash", "not started: %s", why(ctx))
	}
	sh := shell()
	// One pipe keeps stdout and stderr in order.
	cmd, pr, err := env.Sandbox.StartPiped(env.Environ, env.Cwd, sh, "-c", command)
	if err != nil {
		return failf("bash", "cannot start %s in %s: %s", sh, env.Cwd, describe(err))
	}
	pgid := cmd.Process.Pid

	var wg sync.WaitGroup
	sink := newOutputSink(env.Progress)
	readDone := make(chan struct{})
	wg.Go(func() {
		defer close(readDone)
		copyOutput(pr, sink)
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
		ending = timedOut(timeout)
		killed, waitErr = terminate(pgid, exited)
	case <-ctx.Done():
		ending = interrupted(ctx)
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

	if ending != "" {
		return sink.result(ending, true)
	}
	return sink.result(exitStatus(cmd.ProcessState, waitErr), false)
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
// passing it to sink.
func copyOutput(r io.Reader, sink *outputSink) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		sink.write(buf[:n])
		if err != nil {
			sink.flush()
			return
		}
	}
}

// outputSink keeps a command's output (head and tail) and passes it on to
// progress as it comes, in whole characters.
type outputSink struct {
	out      headTail
	progress func(string)
	pending  []byte // the start of a character cut off by the last write
}

func newOutputSink(progress func(string)) *outputSink {
	return &outputSink{out: headTail{keep: bashKeep}, progress: progress}
}

func (s *outputSink) write(p []byte) {
	if len(p) == 0 {
		return
	}
	s.out.Write(p)
	if s.progress != nil {
		s.pending = append(s.pending, p...)
		if whole := completeUTF8(s.pending); whole > 0 {
			s.progress(string(s.pending[:whole]))
			s.pending = append(s.pending[:0], s.pending[whole:]...)
		}
	}
}

// flush passes on what the last write cut off, at the output's end.
func (s *outputSink) flush() {
	if s.progress != nil && len(s.pending) > 0 {
		s.progress(string(s.pending))
		s.pending = nil
	}
}

// result is the tool's answer: the output kept, then how the command
// ended.
func (s *outputSink) result(ending string, failed bool) Result {
	var b strings.Builder
	if text := s.out.String(); text == "" {
		b.WriteString("(no output)\n")
	} else {
		b.WriteString(text)
		if !strings.HasSuffix(text, "\n") {
			b.WriteByte('\n')
		}
	}
	b.WriteString(ending)
	return Result{Content: b.String(), IsError: failed}
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
