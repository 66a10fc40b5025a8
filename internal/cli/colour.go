package cli

import (
	"io"
	"os"
	"strings"

	"charm.land/lipgloss/v2"

	"github.com/agentd-dev/agentd/protocol"
)

// palette colours what ls and status print, on a terminal only: never
// when the output is piped, when NO_COLOR is set (https://no-color.org),
// or on a dumb terminal.
type palette struct{ on bool }

func paletteFor(w io.Writer) palette {
	return palette{on: isTerminal(w) && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"}
}

var (
	styleHeading = lipgloss.NewStyle().Bold(true)
	styleID      = lipgloss.NewStyle().Foreground(lipgloss.Color("12"))
	styleDim     = lipgloss.NewStyle().Foreground(lipgloss.Color("8"))
	styleGood    = lipgloss.NewStyle().Foreground(lipgloss.Color("10"))
	styleBusy    = lipgloss.NewStyle().Foreground(lipgloss.Color("11"))
	styleBad     = lipgloss.NewStyle().Foreground(lipgloss.Color("9"))
)

func (p palette) paint(s lipgloss.Style, text string) string {
	if !p.on || text == "" {
		return text
	}
	return s.Render(text)
}

// heading paints each tab-separated cell of a table's heading row.
func (p palette) heading(row string) string {
	cells := strings.Split(row, "\t")
	for i, c := range cells {
		cells[i] = p.paint(styleHeading, c)
	}
	return strings.Join(cells, "\t")
}
func (p palette) id(text string) string  { return p.paint(styleID, text) }
func (p palette) dim(text string) string { return p.paint(styleDim, text) }

// state colours a session's status or a host's state by what it means:
// at work, at rest, or in trouble.
func (p palette) state(text string) string {
	switch text {
	case protocol.SessionRunning, protocol.StateReady:
		return p.paint(styleGood, text)
	case protocol.SessionIdle, "archived":
		return p.paint(styleDim, text)
	case "damaged":
		return p.paint(styleBad, text)
	}
	return p.paint(styleBusy, text)
}
