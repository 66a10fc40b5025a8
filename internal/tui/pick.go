package tui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	"github.com/agentd-dev/agentd/protocol"
)

// ErrNotPicked is returned by Pick when the person leaves without choosing.
var ErrNotPicked = errors.New("no session chosen")

// Pick asks the person to choose one of sessions on the terminal, the
// first preselected.
func Pick(ctx context.Context, sessions []protocol.Session, in io.Reader, out io.Writer) (protocol.Session, error) {
	m := &picker{sessions: sessions, chosen: -1}
	_, err := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out)).Run()
	if err != nil {
		return protocol.Session{}, err
	}
	if m.chosen < 0 {
		return protocol.Session{}, ErrNotPicked
	}
	return sessions[m.chosen], nil
}

// picker is a list of sessions with a cursor.
type picker struct {
	sessions []protocol.Session
	at       int
	chosen   int
	width    int
}

func (p *picker) Init() tea.Cmd { return nil }

func (p *picker) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		p.width = msg.Width
	case tea.KeyPressMsg:
		switch msg.String() {
		case "up", "k":
			p.at = max(p.at-1, 0)
		case "down", "j":
			p.at = min(p.at+1, len(p.sessions)-1)
		case "enter":
			p.chosen = p.at
			return p, tea.Quit
		case "esc", "q", "ctrl+c", "ctrl+\\":
			return p, tea.Quit
		}
	}
	return p, nil
}

func (p *picker) View() tea.View {
	var b strings.Builder
	b.WriteString(styles().header.Render("sessions of this directory") + "\n")
	for i, s := range p.sessions {
		mark := "  "
		if i == p.at {
			mark = "❯ "
		}
		title := cmp.Or(plain(s.Title), "untitled")
		line := fmt.Sprintf("%s%s  %s  %-8s  %-8s  %s", mark, s.SessionID, padTo(title, 32), s.Status, Ago(s.LastActivityAt), plain(filepath.Base(s.Cwd)))
		if i == p.at {
			line = styles().user.Render(line)
		}
		b.WriteString(truncate(line, max(p.width, 20)) + "\n")
	}
	b.WriteString(styles().dim.Render("↑/↓ choose · enter attach · esc leave"))
	// On the alternate screen: once left, the list is not on the
	// terminal, above the session or the shell's prompt.
	v := tea.NewView(b.String())
	v.AltScreen = true
	return v
}

// padTo cuts s to width cells, or pads it with spaces to them.
func padTo(s string, width int) string {
	s = truncate(s, width)
	return s + strings.Repeat(" ", max(width-lipgloss.Width(s), 0))
}

// Ago says how long ago t was, roughly: "42s ago", "5m ago", "3h ago", or
// the date; "" for no time.
func Ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Since(t).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return t.Local().Format("2006-01-02")
}
