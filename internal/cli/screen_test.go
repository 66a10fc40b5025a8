package cli_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/charmbracelet/x/vt"
	"github.com/creack/pty"

	"github.com/agentd-dev/agentd/internal/agentdtest"
)

// screen is agentd running in a real PTY, its output drawn on a terminal
// emulator that a test reads as a person reads a screen, and its input
// typed as a person types it.
type screen struct {
	t    *testing.T
	cmd  *exec.Cmd
	tty  *os.File // the PTY's controlling side
	exit chan struct{}
	err  error // set before exit closes: how the process ended
	// drained is closed once all the program wrote has reached the
	// screen: the PTY's end of file, after the program exited.
	drained chan struct{}

	mu      sync.Mutex
	term    *vt.Emulator  // guarded by mu
	changed chan struct{} // signalled after each write to term
	stop    atomic.Bool   // the pump of the terminal's answers is to stop
	wg      sync.WaitGroup
}

const screenCols, screenRows = 120, 40

// screen runs `agentd args…` in a PTY.
func (p *place) screen(t *testing.T, args ...string) *screen {
	t.Helper()
	return p.screenOf(t, p.command(args...))
}

// screenOf runs cmd, an agentd command, in a PTY.
func (p *place) screenOf(t *testing.T, cmd *exec.Cmd) *screen {
	t.Helper()
	return p.screenSized(t, cmd, screenCols, screenRows)
}

// screenSized runs cmd, an agentd command, in a PTY cols×rows.
func (p *place) screenSized(t *testing.T, cmd *exec.Cmd, cols, rows int) *screen {
	t.Helper()
	cmd.Env = append(cmd.Env, "TERM=xterm-256color")
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)})
	if err != nil {
		t.Fatal(err)
	}
	s := &screen{t: t, cmd: cmd, tty: tty, exit: make(chan struct{}), drained: make(chan struct{}), term: vt.NewEmulator(cols, rows), changed: make(chan struct{}, 1)}
	s.wg.Go(func() { // the program's output, onto the screen
		defer close(s.drained)
		buf := make([]byte, 32<<10)
		for {
			n, err := tty.Read(buf)
			if n > 0 {
				s.mu.Lock()
				s.term.Write(buf[:n])
				s.mu.Unlock()
				select {
				case s.changed <- struct{}{}:
				default:
				}
			}
			if err != nil {
				return
			}
		}
	})
	s.wg.Go(func() { // the terminal's answers to the program's queries
		buf := make([]byte, 4<<10)
		for {
			n, err := s.term.Read(buf)
			if err != nil || s.stop.Load() {
				return
			}
			tty.Write(buf[:n])
		}
	})
	go func() {
		s.err = cmd.Wait()
		close(s.exit)
	}()
	t.Cleanup(s.close)
	return s
}

func (s *screen) close() {
	select {
	case <-s.exit:
	default:
		s.cmd.Process.Kill()
		<-s.exit
	}
	s.tty.Close()
	// The emulator's input pipe has no reader but the pump: wake it with
	// a key it then drops.
	s.stop.Store(true)
	s.term.SendText(" ")
	s.wg.Wait()
}

// text returns what the screen shows.
func (s *screen) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.term.String()
}

// cellOf returns the column of the cell where what starts on the first
// line of the screen that shows line, or -1: a column of the terminal's
// cells, a wide character taking two.
func (s *screen) cellOf(line, what string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for y := range s.term.Height() {
		var text strings.Builder
		var cols []int // by byte of text: its cell's column
		for x := 0; x < s.term.Width(); x++ {
			c := s.term.CellAt(x, y)
			if c == nil || c.Width == 0 {
				continue
			}
			for range len(c.Content) {
				cols = append(cols, x)
			}
			text.WriteString(c.Content)
		}
		if !strings.Contains(text.String(), line) {
			continue
		}
		if i := strings.Index(text.String(), what); i >= 0 {
			return cols[i]
		}
		return -1
	}
	return -1
}

// waitFor waits until the screen shows what cond accepts, and returns it.
func (s *screen) waitFor(what string, cond func(screen string) bool) string {
	s.t.Helper()
	deadline := time.NewTimer(agentdtest.Timeout)
	defer deadline.Stop()
	for {
		text := s.text()
		if cond(text) {
			return text
		}
		select {
		case <-s.changed:
		case <-s.exit:
			select { // what it wrote last may not be on the screen yet
			case <-s.drained:
			case <-deadline.C:
			}
			if text := s.text(); cond(text) {
				return text
			}
			s.t.Fatalf("agentd exited (%v) before the screen showed %s:\n%s", s.err, what, s.text())
		case <-deadline.C:
			s.t.Fatalf("the screen never showed %s:\n%s", what, s.text())
		}
	}
}

// waitText waits until the screen shows want.
func (s *screen) waitText(want string) string {
	s.t.Helper()
	return s.waitFor(strings.TrimSpace(want), func(text string) bool { return strings.Contains(text, want) })
}

// typeKeys types keys: text, or the bytes a key sends ("\r" for enter,
// "\x1c" for ctrl+\).
func (s *screen) typeKeys(keys string) {
	s.t.Helper()
	if _, err := s.tty.Write([]byte(keys)); err != nil {
		s.t.Fatalf("typing %q: %v", keys, err)
	}
}

// typeLine types text, and once the input shows it, enter.
func (s *screen) typeLine(text string) {
	s.t.Helper()
	s.typeKeys(text)
	s.waitText("> " + text)
	s.typeKeys("\r")
}

// waitExit waits until the program has exited and all it wrote is on the
// screen, and returns how it ended. What a program writes just before it
// exits (the modes it gives the terminal back) is still in the PTY when
// its exit is known.
func (s *screen) waitExit() error {
	s.t.Helper()
	deadline := time.NewTimer(agentdtest.Timeout)
	defer deadline.Stop()
	select {
	case <-s.exit:
	case <-deadline.C:
		s.t.Fatalf("agentd still runs:\n%s", s.text())
	}
	select {
	case <-s.drained:
	case <-deadline.C:
		s.t.Fatalf("agentd exited (%v) but its PTY never reached its end:\n%s", s.err, s.text())
	}
	var exit *exec.ExitError
	if errors.As(s.err, &exit) {
		return exit
	}
	return s.err
}
