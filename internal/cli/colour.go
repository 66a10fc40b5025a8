package cli

import (
	"io"
	"os"
	"strings"
	"sync"

	"charm.land/lipgloss/v2"

	"github.com/agentd-dev/agentd/internal/tui"
	"github.com/agentd-dev/agentd/protocol"
)

// palette colours what ls and status print, on a terminal only: never
// when the output is piped, when NO_COLOR is set (https://no-color.org),
// or on a dumb terminal.
type palette struct{ on bool }

func paletteFor(w io.Writer) palette {
	return palette{on: tui.IsTerminal(w) && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"}
}

// cliStyles are the styles of a command's output.
type cliStyles struct{ heading, id, dim, good, busy, bad lipgloss.Style }

// styles are made the first time output is painted, not when a process
// starts: the host and the workers never paint any.
var styles = sync.OnceValue(func() *cliStyles {
	return &cliStyles{
		heading: lipgloss.NewStyle().Bold(true),
		id:      lipgloss.NewStyle().Foreground(lipgloss.Color("12")),
		dim:     lipgloss.NewStyle().Foreground(lipgloss.Color("8")),
		good:    lipgloss.NewStyle().Foreground(lipgloss.Color("10")),
		busy:    lipgloss.NewStyle().Foreground(lipgloss.Color("11")),
		bad:     lipgloss.NewStyle().Foreground(lipgloss.Color("9")),
	}
})

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
		cells[i] = p.paint(styles().heading, c)
	}
	return strings.Join(cells, "\t")
}
func (p palette) id(text string) string  { return p.paint(styles().id, text) }
func (p palette) dim(text string) string { return p.paint(styles().dim, text) }

// title is a session's title to show, "untitled" dimmed until its
// first prompt gives it one.
func (p palette) title(text string) string {
	if text == "" {
		return p.dim("untitled")
	}
	return tui.Visible(text)
}

// state colours a session's status or a host's state by what it means:
// at work, at rest, or in trouble.
func (p palette) state(text string) string {
	switch text {
	case protocol.SessionRunning, protocol.StateReady:
		return p.paint(styles().good, text)
	case protocol.SessionIdle, "archived":
		return p.paint(styles().dim, text)
	case "damaged":
		return p.paint(styles().bad, text)
	}
	return p.paint(styles().busy, text)
}
