package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/vt"
)

// ptyWatch is the terminal a PTY is shown on, every write to it going
// through the watch. While control is being taken, the PTY's output
// passes as it comes, and is kept from its last whole screen on; control
// taken, it passes and nothing is kept. Control refused, or not asked
// for, the PTY is watched read-only: what was kept is played on a model
// of its screen at the PTY's size, and so is its output from then on.
// While the terminal is smaller than the PTY, the terminal is drawn from
// the model, clipped to it around the PTY's cursor, its last row saying
// so; otherwise the output passes as it comes, its last row marked
// read-only. The model is made only then: it takes a moment and
// megabytes, which a view that takes control need not wait for.
type ptyWatch struct {
	out io.Writer // constant
	ref string    // constant: the PTY's ref

	mu                 sync.Mutex
	emu                *vt.Emulator // guarded by mu; nil until watched read-only with the PTY's size known
	kept               []byte       // guarded by mu: the output shown while control is being taken, from its last whole screen on
	cols, rows         int          // guarded by mu: the PTY's size; 0 while not known
	termCols, termRows int          // guarded by mu: the terminal's size, once watched
	top, left          int          // guarded by mu: the PTY's cell drawn at the terminal's top left while clipped
	clipped            bool         // guarded by mu: the terminal shows the model clipped
	watching           bool         // guarded by mu: the PTY is watched read-only; the watch draws the terminal
	mark               string       // guarded by mu: what the last row says, in place of the clip, when it is not clipped; or ""
	note               string       // guarded by mu: what a key dropped made the last row say, or ""
	done               bool         // guarded by mu: control was taken; the output passes, not played
}

// newPTYWatch returns the watch of PTY ref of size cols×rows (0×0 when
// not known) on terminal out, while control is being taken.
func newPTYWatch(out io.Writer, ref string, cols, rows int) *ptyWatch {
	w := &ptyWatch{out: out, ref: ref}
	w.sizeLocked(cols, rows)
	return w
}

// sizeLocked notes the PTY's size, resizing its model, or making it when
// watched read-only.
func (w *ptyWatch) sizeLocked(cols, rows int) {
	if cols <= 0 || rows <= 0 || cols == w.cols && rows == w.rows {
		return
	}
	w.cols, w.rows = cols, rows
	switch {
	case w.emu != nil:
		w.emu.Resize(cols, rows)
	case w.watching:
		w.modelLocked()
	}
}

// modelLocked makes the model of the PTY's screen, once its size is
// known, and plays on it the output kept.
func (w *ptyWatch) modelLocked() {
	if w.cols == 0 {
		return
	}
	w.emu = vt.NewEmulator(w.cols, w.rows)
	w.emu.SetScrollbackSize(1)
	// The model's answers to the program's queries are the controlling
	// terminal's to give.
	w.emu.InputPipe().(io.Closer).Close()
	w.emu.Write(w.kept)
	w.kept = nil
}

// clipsLocked reports whether the terminal is too small for the PTY.
// Clipped, its last row is the mark's.
func (w *ptyWatch) clipsLocked() bool {
	return w.emu != nil && w.termCols > 0 && w.termRows > 1 && (w.cols > w.termCols || w.rows > w.termRows)
}

// output shows data, the PTY's output (its whole screen when screen is
// set), and plays it on the model once watched read-only.
func (w *ptyWatch) output(data []byte, screen bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.watching {
		if !w.done {
			if screen {
				w.kept = w.kept[:0]
			}
			w.kept = append(w.kept, data...)
		}
		_, err := w.out.Write(data)
		return err
	}
	if w.emu != nil {
		w.emu.Write(data)
	}
	if w.clipsLocked() {
		return w.drawLocked()
	}
	if w.clipped {
		// The terminal fits the PTY again: its whole screen, once, then
		// its output as it comes.
		w.clipped = false
		_, err := io.WriteString(w.out, w.wholeLocked())
		return err
	}
	if screen {
		data = append(data, w.markLocked()...)
	}
	_, err := w.out.Write(data)
	return err
}

// readOnly starts the read-only view, on a terminal of size
// termCols×termRows: control was refused, its last row saying mark, or
// not asked for, mark "".
func (w *ptyWatch) readOnly(mark string, termCols, termRows int) error {
	return w.change(func() {
		w.watching, w.mark = true, mark
		w.termCols, w.termRows = termCols, termRows
		w.modelLocked()
	})
}

// resized notes the terminal's new size and draws it again when clipped.
func (w *ptyWatch) resized(cols, rows int) error {
	return w.change(func() { w.termCols, w.termRows = cols, rows })
}

// ptyResized notes the PTY's new size.
func (w *ptyWatch) ptyResized(cols, rows int) error {
	return w.change(func() { w.sizeLocked(cols, rows) })
}

// dropped says a key typed was not sent: the PTY is only watched.
func (w *ptyWatch) dropped(why string) error {
	return w.change(func() { w.note = why })
}

// change applies fn and, once watched read-only, draws what it changed.
func (w *ptyWatch) change(fn func()) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return nil
	}
	fn()
	switch {
	case !w.watching:
		return nil
	case w.clipsLocked():
		return w.drawLocked()
	case w.clipped:
		w.clipped = false
		_, err := io.WriteString(w.out, w.wholeLocked())
		return err
	}
	_, err := io.WriteString(w.out, w.markLocked())
	return err
}

// controlled ends the watch, control taken: the mark's row is erased if
// drawn, and the output passes as it comes from now on.
func (w *ptyWatch) controlled() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watching && (w.clipped || w.markLocked() != "") {
		io.WriteString(w.out, bannerClear(max(w.termRows, 1)))
	}
	w.watching, w.done, w.emu, w.kept = false, true, nil, nil
}

// markLocked is the last row's mark when the terminal is not clipped:
// the dropped key's note, else the mark; "" for none.
func (w *ptyWatch) markLocked() string {
	note := w.note
	if note == "" {
		note = w.mark
	}
	if note == "" {
		return ""
	}
	return bannerLine(note, w.termCols, w.termRows)
}

// wholeLocked draws the model's whole screen from the terminal's top
// left.
func (w *ptyWatch) wholeLocked() string {
	if w.emu == nil {
		return ""
	}
	pos := w.emu.CursorPosition()
	lines := strings.Split(w.emu.Render(), "\n")
	return "\x1b[0m\x1b[H\x1b[2J" + strings.Join(lines, "\r\n") + fmt.Sprintf("\x1b[0m\x1b[%d;%dH", pos.Y+1, pos.X+1) + w.markLocked()
}

// drawLocked draws the model clipped to the terminal, less its last row:
// the view moves only as far as keeps the cursor in it. The last row
// says what is shown.
func (w *ptyWatch) drawLocked() error {
	w.clipped = true
	viewRows, viewCols := w.termRows-1, w.termCols
	pos := w.emu.CursorPosition()
	w.top = inView(w.top, pos.Y, viewRows, w.rows)
	w.left = inView(w.left, pos.X, viewCols, w.cols)
	lines := strings.Split(w.emu.Render(), "\n")
	var b strings.Builder
	b.WriteString("\x1b[?25l")
	for i := range viewRows {
		fmt.Fprintf(&b, "\x1b[%d;1H\x1b[0m", i+1)
		if y := w.top + i; y < len(lines) {
			b.WriteString(ansi.Cut(lines[y], w.left, w.left+viewCols))
		}
		b.WriteString("\x1b[0m\x1b[K")
	}
	note := fmt.Sprintf("agentd: %s is %d×%d: clipped to rows %d–%d, columns %d–%d", w.ref, w.cols, w.rows,
		w.top+1, min(w.top+viewRows, w.rows), w.left+1, min(w.left+viewCols, w.cols))
	if w.note != "" {
		note = "agentd: " + w.note + " · " + strings.TrimPrefix(note, "agentd: ")
	}
	b.WriteString(bannerLine(note, w.termCols, w.termRows))
	fmt.Fprintf(&b, "\x1b[%d;%dH\x1b[?25h", pos.Y-w.top+1, pos.X-w.left+1)
	_, err := io.WriteString(w.out, b.String())
	return err
}

// inView returns the first of view cells shown of size, moved from at no
// further than keeps cell in view.
func inView(at, cell, view, size int) int {
	switch {
	case cell < at:
		at = cell
	case cell >= at+view:
		at = cell - view + 1
	}
	return max(min(at, size-view), 0)
}

// bannerLine is note drawn on row, the last of a terminal cols wide, in
// reverse video, the cursor and its attributes kept.
func bannerLine(note string, cols, row int) string {
	if r := []rune(note); cols > 2 && len(r) > cols-2 {
		note = string(r[:cols-3]) + "…"
	}
	return fmt.Sprintf("\x1b7\x1b[%d;1H\x1b[0;7m %s \x1b[0m\x1b[K\x1b8", max(row, 1), note)
}

// bannerClear erases row, where a banner was drawn.
func bannerClear(row int) string { return fmt.Sprintf("\x1b7\x1b[%d;1H\x1b[0m\x1b[2K\x1b8", row) }
