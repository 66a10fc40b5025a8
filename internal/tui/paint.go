package tui

import (
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// paint is a style of colours and weight alone, as most of the screen's
// are, drawn as lipgloss draws it without the work lipgloss does for
// what such a style has not (borders, margins, padding, alignment): on a
// first frame that work, with each line's width measured grapheme by
// grapheme, was a third of the cost of drawing the turns that fit.
// Anything the style has besides is drawn by lipgloss.
type paint struct {
	lipgloss.Style
	on string // the sequence that starts the style; "" when lipgloss draws it
}

// newPaint returns st to draw as a paint.
func newPaint(st lipgloss.Style) paint {
	p := paint{Style: st}
	// A style of colours and weight draws one character between its
	// sequence and a reset, nothing else.
	const probe = "x"
	if on, off, ok := strings.Cut(st.Render(probe), probe); ok && on != "" && off == ansi.ResetStyle && !strings.Contains(on, "\n") {
		p.on = on
	}
	return p
}

// Render draws s in the style: each line of it styled, the shorter lines
// then padded with spaces to the widest, as lipgloss's Render does.
func (p paint) Render(s string) string {
	if p.on == "" {
		return p.Style.Render(s)
	}
	s = untab(s)
	if !strings.Contains(s, "\n") {
		return p.on + s + ansi.ResetStyle
	}
	// Each line is measured styled, as lipgloss measures it.
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = p.on + l + ansi.ResetStyle
	}
	return padLines(strings.Join(lines, "\n"), 0)
}

// wrapTo wraps s at width cells and pads each line to the width (or to
// the widest line, should one be wider): what
// lipgloss.NewStyle().Width(width).Render(s) draws, measured at once for
// the lines of printable ASCII.
func wrapTo(s string, width int) string {
	width = max(width, 1)
	return padLines(lipgloss.Wrap(untab(s), width, ""), width)
}

// padLines pads each line of s with spaces to the widest of them, or to
// width cells when that is wider, its tabs and CRLFs first made spaces
// and newlines (wrapping may have made a CRLF), as lipgloss aligns text.
func padLines(s string, width int) string {
	lines := strings.Split(untab(s), "\n")
	widths := make([]int, len(lines))
	widest, size := width, 0
	for i, l := range lines {
		widths[i] = cells(l)
		widest = max(widest, widths[i])
		size += len(l) + 1
	}
	var b strings.Builder
	b.Grow(size + len(lines)*widest)
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l)
		pad(&b, widest-widths[i])
	}
	return b.String()
}

// untab is s with its tabs four spaces and its CRLFs newlines, as
// lipgloss has them before it draws.
func untab(s string) string {
	if strings.Contains(s, "\t") {
		s = strings.ReplaceAll(s, "\t", "    ")
	}
	if strings.Contains(s, "\r\n") {
		s = strings.ReplaceAll(s, "\r\n", "\n")
	}
	return s
}

// pad writes n spaces to b.
func pad(b *strings.Builder, n int) {
	const spaces = "                                                                "
	for n > 0 {
		k := min(n, len(spaces))
		b.WriteString(spaces[:k])
		n -= k
	}
}
