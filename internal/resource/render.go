package resource

import (
	"strings"

	uv "github.com/charmbracelet/ultraviolet"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/vt"
)

// renderLines draws the screen of emu as its lines, each with the styles
// and links of its cells as escape sequences and without its trailing
// spaces: what splitting emu.Render() at its line breaks and trimming each
// line gives, byte for byte. A client attaching to a PTY waits for its
// screen to be drawn, and Render compares every cell whole with the empty
// cell and with the pen (their colours through interfaces), which for a
// screen of plain text costs several times what its text does. Here a
// cell without style or link, as most are, takes a few comparisons; the
// others are drawn as Render draws them.
func renderLines(emu *vt.Emulator) []string {
	w, h := emu.Width(), emu.Height()
	lines := make([]string, h)
	var b strings.Builder
	for y := range h {
		b.Reset()
		b.Grow(w + w/4)
		renderLine(&b, emu, y, w)
		lines[y] = strings.TrimRight(b.String(), " ")
	}
	return lines
}

// renderLine writes line y of emu, w cells wide, as ultraviolet's Render
// does, the plain cells taken on a short path.
func renderLine(b *strings.Builder, emu *vt.Emulator, y, w int) {
	var pen uv.Style
	var link uv.Link
	penZero := true  // pen.IsZero()
	linkSet := false // !link.IsZero()
	pending := 0     // spaces of empty cells, written before the next cell drawn
	resetPen := func() {
		if !penZero {
			b.WriteString(ansi.ResetStyle)
			pen, penZero = uv.Style{}, true
		}
	}
	for x := range w {
		c := emu.CellAt(x, y)
		if c == nil {
			break
		}
		plain := zeroStyle(&c.Style) && len(c.Link.URL) == 0 && len(c.Link.Params) == 0
		switch {
		case plain && c.Width == 0 && c.Content == "", !plain && c.IsZero():
			continue // the second column of a wide cell
		case plain && c.Width == 1 && c.Content == " ", !plain && c.Equal(&uv.EmptyCell):
			resetPen()
			if linkSet {
				b.WriteString(ansi.ResetHyperlink())
				link, linkSet = uv.Link{}, false
			}
			pending++
			continue
		}
		for ; pending > 0; pending-- {
			b.WriteByte(' ')
		}
		if zeroStyle(&c.Style) {
			resetPen()
		}
		if !plain && !c.Style.Equal(&pen) {
			b.WriteString(c.Style.Diff(&pen))
			pen, penZero = c.Style, zeroStyle(&c.Style)
		}
		if !plain || linkSet {
			if c.Link != link && link.URL != "" {
				b.WriteString(ansi.ResetHyperlink())
				link = uv.Link{}
			}
			if c.Link != link {
				b.WriteString(ansi.SetHyperlink(c.Link.URL, c.Link.Params))
				link = c.Link
			}
			linkSet = link != (uv.Link{})
		}
		if len(c.Content) == 1 {
			b.WriteByte(c.Content[0])
		} else {
			b.WriteString(c.Content)
		}
	}
	for ; pending > 0; pending-- {
		b.WriteByte(' ')
	}
	if link.URL != "" {
		b.WriteString(ansi.ResetHyperlink())
	}
	resetPen()
}

// zeroStyle is s.IsZero(), without comparing its colours through their
// interfaces.
func zeroStyle(s *uv.Style) bool {
	return s.Fg == nil && s.Bg == nil && s.UnderlineColor == nil && s.Underline == 0 && s.Attrs == 0
}
