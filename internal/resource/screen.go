package resource

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/vt"
)

// minScreenTail is the least of a PTY's latest output its screen model is
// fed when it has fallen behind: the model (charmbracelet/x/vt) takes a
// few megabytes a second, a PTY can print tens, and the output's last
// 32 KiB, or four bytes a cell of a larger screen, redraw it.
const minScreenTail = 32 << 10

// screen is a PTY's terminal screen model, fed behind its output so that
// the output's relay never waits on it. While output floods (more than
// twice the byte tail, or four screens of lines, waiting for it) it skips
// to the latest; a screen drawn for a client first takes in everything
// printed so far.
//
// A model holds a few megabytes, so a screen whose PTY has printed
// nothing for a while (sleepAfter) falls asleep: it keeps its drawing, the
// cursor and the modes the program changed, and drops the model. Output
// wakes it into a new model that draws what it kept first. What a model
// knows beyond that (a scroll region, a saved cursor, the pen a program
// set and has not drawn with) is not kept, so a screen on the alternate
// screen, where full-screen programs keep such state, stays awake.
type screen struct {
	mu         sync.Mutex
	emu        *vt.Emulator // guarded by mu; nil while asleep
	cols, rows int          // guarded by mu
	seq        uint64       // guarded by mu: the last output sequence emu was fed
	modes      modeChanges  // guarded by mu: the modes the program changed
	slept      drawing      // guarded by mu: the screen as it fell asleep
	// drawn is the model drawn since it last changed, or nil: a PTY's
	// screen asked for twice in a row (a client's stream and its control,
	// say) is drawn once.
	drawn      *drawing // guarded by mu
	sleepAfter time.Duration
	onSleep    func() // constant: told after the model is dropped

	pmu     sync.Mutex
	pending []byte // guarded by pmu: output not fed yet
	spare   []byte // guarded by pmu: the buffer of output last fed, to gather into next
	pendSeq uint64 // guarded by pmu: the sequence of its last byte
	// pendLines counts the lines pending: a model behind by more than a
	// few screens of them skips to the last screen.
	pendLines int  // guarded by pmu
	skipped   bool // guarded by pmu: output before pending was left out

	tail     int // guarded by pmu: the bytes kept when the model falls behind
	tailRows int // guarded by pmu: the lines kept then at most
	kick     chan struct{}
}

// drawing is a screen drawn: its lines, top first, the sequence that puts
// the cursor where the program left it, and, for a screen asleep, its
// plain text.
type drawing struct {
	lines  []string
	cursor string
	text   string
}

// modeChanges are the terminal modes a program set or reset, by mode.
type modeChanges map[ansi.Mode]bool

// DefaultScreenSleep is how long a PTY prints nothing before its screen
// model is dropped.
const DefaultScreenSleep = 5 * time.Second

func newScreen(cols, rows int, sleepAfter time.Duration, onSleep func()) *screen {
	s := &screen{
		cols: cols, rows: rows, modes: modeChanges{}, sleepAfter: sleepAfter, onSleep: onSleep,
		tail: tailFor(cols, rows), tailRows: rows, kick: make(chan struct{}, 1),
	}
	s.wakeLocked()
	return s
}

var newline = []byte{'\n'}

// feedGap is the least rest between two feeds of a screen model. It is
// short: a screen asked for first takes in what waits (a client attaching
// waits on it, at about 0.1 ms a KiB), and the model takes in the same
// output whether in many feeds or few; the rest of four times the feed's
// own time is what bounds a flood's cost.
const feedGap = 2 * time.Millisecond

func tailFor(cols, rows int) int { return max(minScreenTail, 4*cols*rows) }

// wakeLocked gives the screen a model, drawn as it fell asleep.
func (s *screen) wakeLocked() {
	if s.emu != nil {
		return
	}
	emu := vt.NewEmulator(s.cols, s.rows)
	emu.SetScrollbackSize(1) // the screen is all a client is drawn
	// The model's answers to a program's queries are the attached
	// terminal's to give: closing its input discards them.
	emu.InputPipe().(io.Closer).Close()
	if s.slept.lines != nil {
		for mode, set := range s.modes {
			if set {
				emu.WriteString(ansi.SetMode(mode))
			} else {
				emu.WriteString(ansi.ResetMode(mode))
			}
		}
		emu.WriteString(drawLines(s.slept.lines, s.slept.cursor))
		s.slept = drawing{}
	}
	emu.SetCallbacks(vt.Callbacks{
		EnableMode:  func(m ansi.Mode) { s.modes.change(m, true) },
		DisableMode: func(m ansi.Mode) { s.modes.change(m, false) },
	})
	s.emu = emu
}

func (c modeChanges) change(m ansi.Mode, set bool) {
	switch m {
	case ansi.ModeAltScreen, ansi.ModeAltScreenSaveCursor, ansi.ModeSaveCursor:
		// A sleeping screen is the main screen, its cursor where it is.
	default:
		c[m] = set
	}
}

// sleep drops the model, keeping its drawing, unless output waits for it
// or, while its PTY may print more, it shows the alternate screen.
func (s *screen) sleep(ended bool) {
	s.mu.Lock()
	s.catchUpLocked()
	slept := s.sleepLocked(ended)
	s.mu.Unlock()
	if slept && s.onSleep != nil {
		s.onSleep()
	}
}

func (s *screen) sleepLocked(ended bool) bool {
	s.pmu.Lock()
	waiting := len(s.pending) > 0
	s.pmu.Unlock()
	if s.emu == nil || waiting || (s.emu.IsAltScreen() && !ended) {
		return false
	}
	s.slept = s.drawLocked()
	s.slept.text = s.emu.String()
	s.emu, s.drawn = nil, nil
	s.pmu.Lock()
	s.spare = nil // a sleeping screen holds no more than its drawing
	s.pmu.Unlock()
	return true
}

// add queues output seq for the model.
func (s *screen) add(p []byte, seq uint64) {
	s.pmu.Lock()
	s.pending = append(s.pending, p...)
	s.pendLines += bytes.Count(p, newline)
	s.pendSeq = seq
	if len(s.pending) > 2*s.tail || s.pendLines > 4*s.tailRows {
		tail := s.pending[tailStart(s.pending, s.tail, s.tailRows):]
		s.pending = append(s.pending[:0], tail...)
		s.pendLines = bytes.Count(s.pending, newline)
		s.skipped = true
	}
	s.pmu.Unlock()
	s.kickRun()
}

// kickRun tells run there is work: output to feed, or a model that should
// sleep again after a while.
func (s *screen) kickRun() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// tailStart returns where the output p is cut when the model has fallen
// behind: at a line's start, with at most maxBytes after it, and no more
// lines than a screen of rows can show. Scrolling text costs the model a
// copy of its whole screen a line, so of a flood it takes in only the
// lines that stay on the screen.
func tailStart(p []byte, maxBytes, rows int) int {
	lo, end := max(0, len(p)-maxBytes), len(p)
	for range rows {
		i := bytes.LastIndexByte(p[lo:end], '\n')
		if i < 0 {
			break
		}
		end = lo + i
	}
	if end == len(p) {
		return lo // no line starts in the window
	}
	return end + 1
}

// catchUpLocked feeds the model what is pending, waking it for that.
func (s *screen) catchUpLocked() {
	s.pmu.Lock()
	p, seq, skipped := s.pending, s.pendSeq, s.skipped
	if skipped {
		// What scrolled off the screen is not drawn on a clean one.
		p = p[tailStart(p, s.tail, s.tailRows):]
	}
	taken := s.pending
	s.pending, s.spare, s.pendLines, s.skipped = s.spare[:0], nil, 0, false
	s.pmu.Unlock()
	defer func() {
		s.pmu.Lock()
		s.spare = taken[:0]
		s.pmu.Unlock()
	}()
	if len(p) == 0 && !skipped {
		return
	}
	s.wakeLocked()
	s.drawn = nil
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

// run feeds the model as output comes until the output ends (done
// closes), resting after each feed four times as long as it took, and at
// least feedGap: what comes meanwhile waits, and of a flood only its last
// screen is fed (add cuts it), so a flood costs the model a few
// screens a second. The rest is waited out only by output that comes
// within it: a key's echo, which comes after, is fed at once, with no
// timer to wake the worker between keys. A client drawn the screen is
// drawn it caught up. The model sleeps once output stops; when the output
// has ended, the screen is final and sleeps.
func (s *screen) run(done <-chan struct{}) {
	idle := time.NewTimer(s.sleepAfter)
	defer idle.Stop()
	rest := time.NewTimer(0)
	defer rest.Stop()
	var rested time.Time // the end of the rest after the last feed
	for {
		select {
		case <-s.kick:
		case <-idle.C:
			s.sleep(false)
			continue
		case <-done:
			s.sleep(true)
			return
		}
		if wait := time.Until(rested); wait > 0 {
			rest.Reset(wait)
			select {
			case <-rest.C:
			case <-done:
				s.sleep(true)
				return
			}
		}
		start := time.Now()
		s.mu.Lock()
		s.catchUpLocked()
		s.mu.Unlock()
		took := time.Since(start)
		rested = start.Add(took + max(feedGap, 4*took))
		idle.Reset(s.sleepAfter)
	}
}

// draw returns the screen as it is after all output so far, and the last
// output sequence it shows.
func (s *screen) draw() (lines []string, cursor string, seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.catchUpLocked()
	d := s.drawingLocked()
	return d.lines, d.cursor, s.seq
}

// drawingLocked returns the screen drawn, asleep or awake.
func (s *screen) drawingLocked() drawing {
	if s.emu == nil {
		return s.slept
	}
	if s.drawn == nil {
		d := s.drawLocked()
		s.drawn = &d
	}
	return *s.drawn
}

// drawLocked draws the model: its lines and cursor, not its plain text,
// which the screens a client is sent do not need (it costs a third as
// much again as the lines).
func (s *screen) drawLocked() drawing {
	pos := s.emu.CursorPosition()
	// Trailing spaces are left out: the screen is cleared first.
	return drawing{lines: renderLines(s.emu), cursor: fmt.Sprintf("\x1b[%d;%dH", pos.Y+1, pos.X+1)}
}

// text returns the screen as plain text after all output so far.
func (s *screen) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.catchUpLocked()
	if s.emu == nil {
		return s.slept.text
	}
	return s.emu.String()
}

// resize resizes the model after taking in the output printed before.
func (s *screen) resize(cols, rows int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.catchUpLocked()
	s.wakeLocked()
	s.emu.Resize(cols, rows)
	s.drawn = nil
	s.cols, s.rows = cols, rows
	s.pmu.Lock()
	s.tail, s.tailRows = tailFor(cols, rows), rows
	s.pmu.Unlock()
	s.kickRun()
}

// size returns the model's size.
func (s *screen) size() (cols, rows int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cols, s.rows
}

// drawLines draws a screen's lines for a terminal from its top left.
func drawLines(lines []string, cursor string) string {
	return "\x1b[H\x1b[2J" + strings.Join(lines, "\r\n") + cursor
}
