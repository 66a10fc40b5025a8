package worker

import (
	"bytes"
	"context"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/internal/transport"
	"github.com/agentd-dev/agentd/protocol"
)

// A PTY's controller on a connection of its own to the worker may go one
// step further than typing there: it lends the worker its terminal
// (runtime.resource.direct.terminal), passing two descriptors of it with
// the request. The worker then reads the keys from the terminal and types
// them into the PTY, and writes the PTY's screen and output to it, as tmux's
// server does with its clients' terminals: a key's echo wakes no process
// but the worker and the PTY's program. The client neither reads nor writes
// the terminal meanwhile. The worker gives the terminal back, answering
// the call, once the detach key is typed, the controller ends (its output
// up to then written), the terminal falls behind the PTY's output, the
// client half-closes its connection or the terminal hangs up; the answer
// comes only once the worker no longer reads or writes the terminal and
// has closed its descriptors, so the client may use the terminal again at
// once. The terminal's modes are the client's to set and restore.

// lentTerminal is a terminal lent to the worker.
type lentTerminal struct {
	in, out *os.File // constant: nonblocking, through the runtime's poller
	detach  int      // constant: the detach key, or -1 for none
	given   chan struct{}
	once    sync.Once
	reason  string // set once, before given is closed

	mu     sync.Mutex // held across a write to out
	closed bool       // guarded by mu: out is written no more
}

// end gives the terminal back for reason, the first time it is called:
// the read of its keys and a write blocked on it end.
func (t *lentTerminal) end(reason string) {
	t.once.Do(func() {
		t.reason = reason
		close(t.given)
		t.in.SetReadDeadline(time.Now())
		t.out.SetWriteDeadline(time.Now())
	})
}

// write writes a piece of the PTY's output, quoted as a JSON string, to
// the terminal, unless it has been given back. A write that fails gives
// the terminal back.
func (t *lentTerminal) write(quoted []byte) {
	raw := (&protocol.PtyDataFields{Data: quoted}).AppendData(transport.GetBuffer(len(quoted)))
	defer transport.PutBuffer(raw)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if _, err := t.out.Write(raw); err != nil {
		t.end(protocol.TerminalReturned)
	}
}

// close closes the terminal's descriptors once no write is under way;
// nothing writes to it after.
func (t *lentTerminal) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.in.Close()
	t.out.Close()
}

// lendTerminal answers runtime.resource.direct.terminal: it reads and
// draws the terminal passed with the call for the connection's controller
// until it gives it back, and answers why.
func (s *session) lendTerminal(ctx context.Context, call *server.Call, in *protocol.DirectTerminalInput) (protocol.DirectTerminalResult, error) {
	conn, err := s.connection(call)
	if err != nil {
		return protocol.DirectTerminalResult{}, err
	}
	files := call.TakeFiles(2)
	if files == nil {
		return protocol.DirectTerminalResult{}, protocol.Errorf(protocol.CodeInvalidRequest,
			"no terminal came with the request: pass two descriptors beside its first byte (SCM_RIGHTS), the terminal to read keys from and the one to write to")
	}
	t := &lentTerminal{in: files[0], out: files[1], detach: -1, given: make(chan struct{})}
	if in.DetachKey != "" {
		t.detach = int(in.DetachKey[0])
	}
	for i, f := range files {
		if !isTerminal(f) {
			t.close()
			return protocol.DirectTerminalResult{}, protocol.Errorf(protocol.CodeInvalidRequest, "descriptor %d passed with the request is not a terminal", i)
		}
	}
	s.direct.mu.Lock()
	b := conn.direct
	switch {
	case b == nil || b.sub == nil:
		s.direct.mu.Unlock()
		t.close()
		return protocol.DirectTerminalResult{}, protocol.Errorf(protocol.CodeOperationConflict, "this connection carries no controller: open its stream with runtime.resource.direct.open first")
	case b.sub.lent.Load() != nil:
		s.direct.mu.Unlock()
		t.close()
		return protocol.DirectTerminalResult{}, protocol.Errorf(protocol.CodeOperationConflict, "a terminal is lent on this connection already")
	}
	b.sub.lent.Store(t)
	s.direct.mu.Unlock()

	// The PTY's screen first, then its output, all of it to the terminal
	// from here on: what the connection carried before the client
	// stopped drawing it is drawn over.
	if err := s.screenFirst(b.sub, b.ref); err != nil {
		t.end(protocol.TerminalControlEnded)
	}
	var reading sync.WaitGroup
	reading.Go(func() { s.readKeys(t, b) })
	select {
	case <-t.given:
	case <-call.InputClosed:
		t.end(protocol.TerminalReturned)
	case <-ctx.Done():
		t.end(protocol.TerminalReturned)
	}
	reading.Wait()
	t.close()
	switch t.reason {
	case protocol.TerminalDetached, protocol.TerminalReturned:
		// The client leaves the PTY, or goes on through the host.
		s.unbind(conn, protocol.ClosedClientClosed)
	}
	return protocol.DirectTerminalResult{Reason: t.reason}, nil
}

// readKeys types the keys read from terminal t into b's PTY until the
// terminal is given back, giving it back at the detach key.
func (s *session) readKeys(t *lentTerminal, b *directBinding) {
	buf := make([]byte, 4<<10)
	for {
		n, err := t.in.Read(buf)
		keys, detached := buf[:n], false
		if i := bytes.IndexByte(keys, byte(t.detach)); t.detach >= 0 && i >= 0 {
			keys, detached = keys[:i], true
		}
		if len(keys) > 0 {
			if err := s.res.Type(b.owner, b.ref, b.controllerID, keys); err != nil {
				t.end(protocol.TerminalControlEnded)
				return
			}
		}
		switch {
		case detached:
			t.end(protocol.TerminalDetached)
			return
		case err != nil:
			// Given back already (the deadline), or hung up.
			t.end(protocol.TerminalReturned)
			return
		}
	}
}

// isTerminal reports whether f is a terminal, without taking it out of
// nonblocking mode as f.Fd would.
func isTerminal(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	rc.Control(func(fd uintptr) {
		_, err := unix.IoctlGetTermios(int(fd), unix.TCGETS)
		ok = err == nil
	})
	return ok
}
