package resource

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/x/vt"
)

// minScreenTail is the least of a PTY's latest output its screen model is
// fed when it has fallen behind: the model (charmbracelet/x/vt) takes a
// few megabytes a second, a PTY can print tens, and the output's last
// 32 KiB, or four bytes a cell of a larger screen, redraw it.
const minScreenTail = 32 << 10

// screen is a PTY's terminal screen model, fed behind its output so that
// the output's relay never waits on it. While output floods it skips to
// the latest, and uses at most about a fifth of a core; a screen drawn
// for a client first takes in everything printed so far.
type screen struct {
	mu  sync.Mutex   // serializes feeding: output reaches emu in order
	emu *vt.Emulator // guarded by mu
	seq uint64       // guarded by mu: the last output sequence emu was fed

	pmu     sync.Mutex
	pending []byte // guarded by pmu: output not fed yet
	pendSeq uint64 // guarded by pmu: the sequence of its last byte
	skipped bool   // guarded by pmu: output before pending was left out

	tail int // guarded by pmu: the output kept when the model falls behind
	kick chan struct{}
}

func newScreen(cols, rows int) *screen {
	return &screen{emu: vt.NewEmulator(cols, rows), tail: tailFor(cols, rows), kick: make(chan struct{}, 1)}
}

func tailFor(cols, rows int) int { return max(minScreenTail, 4*cols*rows) }

// add queues output seq for the model.
func (s *screen) add(p []byte, seq uint64) {
	s.pmu.Lock()
	s.pending = append(s.pending, p...)
	s.pendSeq = seq
	if len(s.pending) > 2*s.tail {
		// Keep the last s.tail bytes, from a line's start when there
		// is one.
		tail := s.pending[len(s.pending)-s.tail:]
		if i := bytes.IndexByte(tail, '\n'); i >= 0 {
			tail = tail[i+1:]
		}
		s.pending = append(s.pending[:0], tail...)
		s.skipped = true
	}
	s.pmu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// catchUpLocked feeds the model what is pending.
func (s *screen) catchUpLocked() {
	s.pmu.Lock()
	p, seq, skipped := s.pending, s.pendSeq, s.skipped
	s.pending, s.skipped = nil, false
	s.pmu.Unlock()
	if skipped {
		// Cancel any sequence the model is inside and reset it: what
		// follows is drawn on a clean screen.
		s.emu.Write([]byte("\x18\x1bc"))
	}
	if len(p) > 0 {
		s.emu.Write(p)
		s.seq = seq
	}
}

// run feeds the model as output comes until done closes, pausing four
// times as long as each feed took.
func (s *screen) run(done <-chan struct{}) {
	for {
		select {
		case <-s.kick:
		case <-done:
			return
		}
		start := time.Now()
		s.mu.Lock()
		s.catchUpLocked()
		s.mu.Unlock()
		if d := time.Since(start); d > time.Millisecond {
			t := time.NewTimer(4 * d)
			select {
			case <-t.C:
			case <-done:
				t.Stop()
				return
			}
		}
	}
}

// drain discards the model's answers to a program's queries: they are
// the attached terminal's to give. It returns once close is called.
func (s *screen) drain() { io.Copy(io.Discard, s.emu) }

// close ends drain.
func (s *screen) close() { s.emu.InputPipe().(io.Closer).Close() }

// draw returns the screen as it is after all output so far: its lines, top
// first, the sequence that puts the cursor where the program left it, and
// the last output sequence it shows.
func (s *screen) draw() (lines []string, cursor string, seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.catchUpLocked()
	pos := s.emu.CursorPosition()
	lines = strings.Split(s.emu.Render(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ") // the screen is cleared first
	}
	return lines, fmt.Sprintf("\x1b[%d;%dH", pos.Y+1, pos.X+1), s.seq
}

// text returns the screen as plain text after all output so far.
func (s *screen) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.catchUpLocked()
	return s.emu.String()
}

// resize resizes the model after taking in the output printed before.
func (s *screen) resize(cols, rows int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.catchUpLocked()
	s.emu.Resize(cols, rows)
	s.pmu.Lock()
	s.tail = tailFor(cols, rows)
	s.pmu.Unlock()
}

// size returns the model's size.
func (s *screen) size() (cols, rows int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.emu.Width(), s.emu.Height()
}

// drawLines draws a screen's lines for a terminal from its top left.
func drawLines(lines []string, cursor string) string {
	return "\x1b[H\x1b[2J" + strings.Join(lines, "\r\n") + cursor
}
