package sessiontest_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/protocol"
)

// userTerminal is a terminal a person types on: the test types into its
// master and reads what is drawn there; its slave, in raw mode, is what
// the client lends.
type userTerminal struct {
	t      *testing.T
	master *os.File
	slave  *os.File // the test's own description, never lent

	mu    sync.Mutex
	cond  *sync.Cond
	drawn bytes.Buffer // guarded by mu: all the master has read
	done  bool         // guarded by mu: the master's reader has stopped
}

func newUserTerminal(t *testing.T) *userTerminal {
	t.Helper()
	m, s, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	tio, err := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Lflag &^= unix.ECHO | unix.ICANON | unix.ISIG | unix.IEXTEN
	tio.Iflag &^= unix.ICRNL | unix.IXON
	tio.Oflag &^= unix.OPOST
	if err := unix.IoctlSetTermios(int(s.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	u := &userTerminal{t: t, master: m, slave: s}
	u.cond = sync.NewCond(&u.mu)
	var reading sync.WaitGroup
	reading.Go(func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := m.Read(buf)
			u.mu.Lock()
			u.drawn.Write(buf[:n])
			u.done = err != nil
			u.cond.Broadcast()
			u.mu.Unlock()
			if err != nil {
				return
			}
		}
	})
	t.Cleanup(func() {
		s.Close()
		m.Close()
		reading.Wait()
	})
	return u
}

// open returns a description of the terminal of the client's own, as
// agentd pty opens one to lend.
func (u *userTerminal) open() *os.File {
	u.t.Helper()
	f, err := os.OpenFile(u.slave.Name(), os.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		u.t.Fatal(err)
	}
	u.t.Cleanup(func() { f.Close() })
	return f
}

func (u *userTerminal) typeKeys(keys string) {
	u.t.Helper()
	if _, err := u.master.WriteString(keys); err != nil {
		u.t.Fatal(err)
	}
}

// waitDrawn waits until want has been drawn on the terminal count times.
func (u *userTerminal) waitDrawn(want string, count int) {
	u.t.Helper()
	stop := context.AfterFunc(agentdtest.Context(u.t), func() {
		u.mu.Lock()
		u.done = true
		u.cond.Broadcast()
		u.mu.Unlock()
	})
	defer stop()
	u.mu.Lock()
	defer u.mu.Unlock()
	for strings.Count(u.drawn.String(), want) < count {
		if u.done {
			u.t.Fatalf("%q was drawn %d times, not %d: the terminal shows %q", want, strings.Count(u.drawn.String(), want), count, u.drawn.String())
		}
		u.cond.Wait()
	}
}

// readOwn reads what is typed on the terminal through the test's own
// description, as the client reads its keys once the terminal is back.
func (u *userTerminal) readOwn(want string) {
	u.t.Helper()
	var got []byte
	deadline := time.Now().Add(agentdtest.Timeout)
	for !bytes.Contains(got, []byte(want)) {
		fds := []unix.PollFd{{Fd: int32(u.slave.Fd()), Events: unix.POLLIN}}
		if time.Now().After(deadline) {
			u.t.Fatalf("the terminal's keys read %q, not %q: something else reads them", got, want)
		}
		if n, err := unix.Poll(fds, 100); err != nil || n == 0 {
			continue
		}
		buf := make([]byte, 256)
		n, err := unix.Read(int(u.slave.Fd()), buf)
		if err == nil {
			got = append(got, buf[:n]...)
		}
	}
}

// lent starts a PTY running command in a new session, takes its control,
// moves it to the PTY's worker and returns the worker's stream once its
// screen shows ready.
func lent(t *testing.T, command string) (p *sessionPlace, c *client.Conn, id string, ref string, ctl *client.Controller, s *client.PTYStream) {
	t.Helper()
	p = newSessionPlace(t)
	c = p.conn()
	id = p.newSession(c)
	ctx := agentdtest.Context(t)
	r, err := client.Call(ctx, c, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{SessionID: id, LaunchID: "lent", Command: command, PTY: true})
	if err != nil {
		t.Fatal(err)
	}
	if ctl, err = c.AcquirePTY(ctx, id, r.Ref); err != nil {
		t.Fatal(err)
	}
	if s, err = ctl.Direct(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	var shown strings.Builder
	for !strings.Contains(shown.String(), "ready") {
		ev, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for the PTY to be ready: %v", err)
		}
		shown.Write(ev.Data)
	}
	return p, c, id, r.Ref, ctl, s
}

type lendResult struct {
	reason string
	err    error
}

func lend(ctx context.Context, s *client.PTYStream, in, out *os.File) <-chan lendResult {
	done := make(chan lendResult, 1)
	go func() {
		reason, err := s.LendTerminal(ctx, in, out, "\x1c")
		done <- lendResult{reason, err}
	}()
	return done
}

// A terminal lent to the PTY's worker is read and drawn there: the keys
// typed on it reach the PTY and its echo is drawn on it, the PTY's
// screen first, though nothing of the client reads or writes it. The
// detach key gives it back, the keys before it typed and those after it
// not; from then on the worker reads nothing of it, and the control
// stays the client's, through the host.
func TestATerminalLentToAPTYsWorkerIsReadAndDrawnThereUntilTheDetachKey(t *testing.T) {
	_, c, id, ref, ctl, s := lent(t, "echo ready; exec cat")
	ctx := agentdtest.Context(t)
	u := newUserTerminal(t)
	in := u.open()
	done := lend(ctx, s, in, in)
	u.waitDrawn("ready", 1) // the screen
	u.typeKeys("lent-key\r")
	u.waitDrawn("lent-key", 2) // the PTY's echo, and cat's line

	// The worker holds the terminal, and no command it starts meanwhile
	// does: it keeps the descriptors to itself.
	started, err := client.Call(ctx, c, protocol.OpRuntimeResourceStart, protocol.ResourceStartInput{SessionID: id, LaunchID: "meanwhile", Command: "echo started; exec sleep 60", PTY: true})
	if err != nil {
		t.Fatal(err)
	}
	sw, err := c.WatchPTY(ctx, id, started.Ref)
	if err != nil {
		t.Fatal(err)
	}
	defer sw.Close()
	for shown := ""; !strings.Contains(shown, "started"); {
		ev, err := sw.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for a command started while the terminal is lent: %v", err)
		}
		shown += string(ev.Data)
	}
	if pids := agentdtest.Holders(t, u.slave.Name()); len(pids) != 1 {
		t.Fatalf("the lent terminal is held by processes %v, want the worker's alone", pids)
	}

	u.typeKeys("before-detach\x1cafter-detach")
	r := <-done
	if r.err != nil || r.reason != protocol.TerminalDetached {
		t.Fatalf("the lend ended with %q, %v; want %q", r.reason, r.err, protocol.TerminalDetached)
	}
	// Given back: what is typed now is the client's to read.
	u.typeKeys("mine-again")
	u.readOwn("mine-again")

	if err := ctl.Control(ctx, []byte("\r"), 0, 0); err != nil {
		t.Fatalf("typing through the host once the terminal is back: %v", err)
	}
	w, err := c.WatchPTY(ctx, id, ref)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var shown strings.Builder
	for strings.Count(shown.String(), "before-detach") < 2 {
		ev, err := w.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for the keys before the detach key on the PTY: %v (it shows %q)", err, shown.String())
		}
		shown.Write(ev.Data)
	}
	if strings.Contains(shown.String(), "after-detach") {
		t.Fatalf("the keys after the detach key reached the PTY: %q", shown.String())
	}
}

// A PTY that exits while its controller's terminal is lent has all it
// printed drawn on the terminal, then the terminal is given back, the
// control ended; the stream tells the exit.
func TestATerminalLentIsGivenBackWhenThePTYExitsAfterAllItPrinted(t *testing.T) {
	_, _, _, _, _, s := lent(t, "echo ready; read x; i=0; while [ $i -lt 200 ]; do echo line-$i; i=$((i+1)); done; echo bye-$x; exit 5")
	ctx := agentdtest.Context(t)
	u := newUserTerminal(t)
	in := u.open()
	done := lend(ctx, s, in, in)
	u.waitDrawn("ready", 1)
	u.typeKeys("42\r")
	r := <-done
	if r.err != nil || r.reason != protocol.TerminalControlEnded {
		t.Fatalf("the lend ended with %q, %v; want %q", r.reason, r.err, protocol.TerminalControlEnded)
	}
	u.waitDrawn("bye-42", 1)
	for {
		ev, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("the worker's stream ended with %v before it told the PTY's exit", err)
		}
		if ev.Resource != nil && ev.Resource.State == protocol.ResourceExited {
			if ev.Resource.ExitCode == nil || *ev.Resource.ExitCode != 5 {
				t.Fatalf("the PTY exited with %v, want 5", ev.Resource.ExitCode)
			}
			break
		}
		if bytes.Contains(ev.Data, []byte("line-")) {
			t.Fatalf("the worker's stream carried the PTY's output while the terminal was lent: %q", ev.Data)
		}
	}
}

// The client asks for its terminal back by ending the call's context: the
// worker gives it back, reading none of it after. A second terminal on
// the same connection is refused meanwhile.
func TestATerminalLentComesBackWhenAskedAndOnlyOneIsLent(t *testing.T) {
	_, _, _, _, _, s := lent(t, "echo ready; exec cat")
	ctx := agentdtest.Context(t)
	u := newUserTerminal(t)
	in := u.open()
	lendCtx, cancel := context.WithCancel(ctx)
	done := lend(lendCtx, s, in, in)
	u.waitDrawn("ready", 1)

	other := newUserTerminal(t).open()
	_, err := s.LendTerminal(ctx, other, other, "")
	if !errors.Is(err, client.ErrOperationConflict) {
		t.Fatalf("a second terminal on the connection: %v, want operation_conflict", err)
	}
	u.typeKeys("still-lent\r")
	u.waitDrawn("still-lent", 2)

	cancel()
	r := <-done
	if r.err != nil || r.reason != protocol.TerminalReturned {
		t.Fatalf("the lend ended with %q, %v; want %q", r.reason, r.err, protocol.TerminalReturned)
	}
	u.typeKeys("mine-again")
	u.readOwn("mine-again")
}

// A descriptor that is not a terminal is refused, naming it.
func TestADescriptorThatIsNoTerminalIsNotLent(t *testing.T) {
	_, _, _, _, _, s := lent(t, "echo ready; exec cat")
	ctx := agentdtest.Context(t)
	u := newUserTerminal(t)
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	defer wr.Close()
	_, err = s.LendTerminal(ctx, u.open(), wr, "")
	var remote *client.RemoteError
	if !errors.As(err, &remote) || remote.Code != protocol.CodeInvalidRequest || !strings.Contains(remote.Message, "descriptor 1") {
		t.Fatalf("a pipe lent as the terminal to write to: %v, want invalid_request naming descriptor 1", err)
	}
}

// A terminal that takes the PTY's output more slowly than the PTY makes
// it (here: never read) is given back as slow, the PTY not held back for
// it, and the client goes on through the host.
func TestASlowTerminalLentIsGivenBackAndThePTYRunsOn(t *testing.T) {
	_, c, id, ref, _, s := lent(t, "stty -echo; echo ready; read go; yes flood")
	ctx := agentdtest.Context(t)
	m, sl, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	defer sl.Close()
	in, err := os.OpenFile(sl.Name(), os.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	done := lend(ctx, s, in, in)
	// Nobody reads the master: the terminal fills.
	if _, err := m.WriteString("go\r"); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.reason != protocol.TerminalSlow {
		t.Fatalf("the lend ended with %q, %v; want %q", r.reason, r.err, protocol.TerminalSlow)
	}
	w, err := c.WatchPTY(ctx, id, ref)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for seen := 0; seen < 2; {
		ev, err := w.Next(ctx)
		if err != nil {
			t.Fatalf("the PTY's stream through the host: %v", err)
		}
		if bytes.Contains(ev.Data, []byte("flood")) {
			seen++
		}
	}
}
