package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

// The screen lists the session's runtime resources (its shell runs and
// PTYs): a line naming those that run under the transcript, and, while the
// pane is open (tab), all of them, one chosen. Enter on a running PTY
// hands the terminal over to Options.OpenPTY, which shows it full screen
// until the person comes back (Ctrl-\) or the PTY exits; on a shell run,
// to Options.OpenLog, which shows its output, live while it runs, until
// the person comes back. The screen is drawn again then.

// paneRows bounds the resources the open pane shows at once.
const paneRows = 8

// paneHelp names the keys while the pane is open.
const paneHelp = "↑/↓ choose · enter open the PTY full screen or the run's output · tab/esc back · ctrl+\\ detach"

// resources are the session's runtime resources as the screen knows them:
// those the list read when the stream opened, with each change the stream
// brought since. The zero value is an empty list.
type resources struct {
	list     []protocol.Resource // by start, the oldest first
	selected string              // the chosen resource's ref, while the pane is open
	gen      int                 // counts the lists started afresh: a read for an older one is dropped
}

// put adds r, or updates the resource of its ref. A resource that has
// exited stays exited: a list read before its exit, and answered after
// the update that said so, does not bring it back.
func (rs *resources) put(r protocol.Resource) {
	i := slices.IndexFunc(rs.list, func(x protocol.Resource) bool { return x.Ref == r.Ref })
	if i < 0 {
		rs.list = append(rs.list, r)
		slices.SortStableFunc(rs.list, func(a, b protocol.Resource) int { return a.StartedAt.Compare(b.StartedAt) })
		return
	}
	if rs.list[i].State == protocol.ResourceExited && r.State != protocol.ResourceExited {
		return
	}
	rs.list[i] = r
}

// reset starts the list afresh, for a stream opened again: the session's
// worker may be another, with other resources.
func (rs *resources) reset() {
	rs.list = nil
	rs.gen++
}

// running returns the resources that run.
func (rs *resources) running() []protocol.Resource {
	var out []protocol.Resource
	for _, r := range rs.list {
		if r.State == protocol.ResourceRunning {
			out = append(out, r)
		}
	}
	return out
}

// chosen returns the index of the chosen resource: the one selected, else
// the latest running PTY, else the latest; -1 for an empty list.
func (rs *resources) chosen() int {
	if i := slices.IndexFunc(rs.list, func(r protocol.Resource) bool { return r.Ref == rs.selected }); i >= 0 {
		return i
	}
	for i, r := range slices.Backward(rs.list) {
		if r.Kind == protocol.ResourcePTY && r.State == protocol.ResourceRunning {
			return i
		}
	}
	return len(rs.list) - 1
}

// move moves the choice by delta, within the list.
func (rs *resources) move(delta int) {
	if len(rs.list) == 0 {
		return
	}
	i := min(max(rs.chosen()+delta, 0), len(rs.list)-1)
	rs.selected = rs.list[i].Ref
}

// Messages of the pane's commands.
type (
	// resourcesMsg is the session's resources as a list read them, for
	// the list of generation gen.
	resourcesMsg struct {
		gen  int
		list []protocol.Resource
		err  error
	}
	// ptyDoneMsg ends a PTY shown full screen: what to tell the person.
	ptyDoneMsg struct {
		ref  string
		note string
		err  error
	}
)

// readResources lists the session's resources.
func (m *model) readResources() tea.Cmd {
	if m.f == nil {
		return nil // a screen with no session behind it
	}
	c, id, gen := m.f.Conn(), m.f.SessionID(), m.res.gen
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(m.ctx, requestTimeout)
		defer cancel()
		for {
			list, err := c.Resources(ctx, id)
			// A conflict: the list changed between its pages; read again.
			if !errors.Is(err, client.ErrOperationConflict) || ctx.Err() != nil {
				return resourcesMsg{gen, list, err}
			}
		}
	}
}

// listed applies a list read.
func (m *model) listed(msg resourcesMsg) {
	if msg.gen != m.res.gen {
		return
	}
	if msg.err != nil {
		if m.ctx.Err() == nil {
			m.flash = fmt.Sprintf("listing the session's resources: %v", msg.err)
		}
		return
	}
	for _, r := range msg.list {
		m.res.put(r)
	}
}

// paneKey handles a key while the pane is open; handled is false for a
// key the screen handles as ever.
func (m *model) paneKey(key string) (cmd tea.Cmd, handled bool) {
	switch key {
	case "tab", "esc":
		m.paneOpen = false
	case "up", "k":
		m.res.move(-1)
	case "down", "j":
		m.res.move(1)
	case "home":
		m.res.move(-len(m.res.list))
	case "end":
		m.res.move(len(m.res.list))
	case "enter":
		return m.open(), true
	case "ctrl+\\", "ctrl+c", "pgup", "pgdown", "ctrl+u", "ctrl+d":
		return nil, false
	}
	return nil, true
}

// togglePane opens the pane, or says why there is nothing to open.
func (m *model) togglePane() {
	if len(m.res.list) == 0 {
		m.flash = "the session runs no shell run or PTY yet (`agentd shell " + m.sessionID() + "` starts a shell on one)"
		return
	}
	m.paneOpen = true
	m.res.selected = m.res.list[m.res.chosen()].Ref
}

func (m *model) sessionID() string {
	if m.f != nil {
		return m.f.SessionID()
	}
	return m.proj.Projection().Session.SessionID
}

// open shows the chosen resource full screen: a running PTY, or a shell
// run's output.
func (m *model) open() tea.Cmd {
	i := m.res.chosen()
	if i < 0 {
		return nil
	}
	r := m.res.list[i]
	ref := plain(r.Ref)
	switch {
	case r.Kind != protocol.ResourcePTY && m.openLog != nil:
		x := &ptyExec{ctx: m.ctx, ref: r.Ref, open: m.openLog}
		return tea.Exec(x, func(err error) tea.Msg { return ptyDoneMsg{ref: r.Ref, note: x.note, err: err} })
	case r.Kind != protocol.ResourcePTY:
		m.flash = fmt.Sprintf("%s is a shell run, not a PTY: it has no screen to open full screen", ref)
	case r.State != protocol.ResourceRunning:
		m.flash = fmt.Sprintf("%s has exited (%s): it has no screen to open", ref, exitText(r))
	case m.openPTY == nil:
		m.flash = "PTYs cannot be opened from this screen"
	default:
		x := &ptyExec{ctx: m.ctx, ref: r.Ref, open: m.openPTY}
		return tea.Exec(x, func(err error) tea.Msg { return ptyDoneMsg{ref: r.Ref, note: x.note, err: err} })
	}
	return nil
}

// ptyDone tells the person how the PTY's view ended.
func (m *model) ptyDone(msg ptyDoneMsg) {
	switch {
	case msg.err != nil && m.ctx.Err() == nil:
		m.flash = fmt.Sprintf("%s: %v", plain(msg.ref), msg.err)
	case msg.note != "":
		m.flash = msg.note
	}
}

// ptyExec runs a PTY's view, or a shell run's, while the screen has let
// go of the terminal.
// The view draws on the terminal itself: the readers and writers Bubble
// Tea offers are not used.
type ptyExec struct {
	ctx  context.Context
	ref  string
	open func(ctx context.Context, ref string) (string, error)
	note string // what open said, once Run has returned
}

func (x *ptyExec) Run() error {
	var err error
	x.note, err = x.open(x.ctx, x.ref)
	return err
}

func (x *ptyExec) SetStdin(io.Reader)  {}
func (x *ptyExec) SetStdout(io.Writer) {}
func (x *ptyExec) SetStderr(io.Writer) {}

// resourceLines are the panel's lines about resources: those that run,
// or, with the pane open, the list.
func (m *model) resourceLines() []string {
	if !m.paneOpen {
		run := m.res.running()
		if len(run) == 0 {
			return nil
		}
		refs := make([]string, 0, len(run))
		for _, r := range run {
			refs = append(refs, plain(r.Ref))
		}
		return []string{styles().dim.Render(truncate(fmt.Sprintf("running: %s · tab lists the session's resources", strings.Join(refs, ", ")), m.width))}
	}
	n := len(m.res.list)
	at := m.res.chosen()
	from := min(max(at-paneRows/2, 0), max(n-paneRows, 0))
	to := min(from+paneRows, n)
	head := fmt.Sprintf("resources of the session (%d of %d)", at+1, n)
	if from > 0 {
		head += fmt.Sprintf(" · %d above", from)
	}
	if to < n {
		head += fmt.Sprintf(" · %d below", n-to)
	}
	lines := []string{styles().dim.Render(truncate(head, m.width))}
	now := time.Now()
	for i := from; i < to; i++ {
		row := ResourceRow(m.res.list[i], now)
		if i == at {
			lines = append(lines, styles().header.Render(truncate("❯ "+row, m.width)))
		} else {
			lines = append(lines, truncate("  "+row, m.width))
		}
	}
	return lines
}

// ResourceRow is a resource on one line, as a person reads it: its ref,
// kind, state (an exited one's exit code), age and command, every field
// with its control characters made visible.
func ResourceRow(r protocol.Resource, now time.Time) string {
	state := plain(r.State)
	if r.State == protocol.ResourceExited {
		state = "exit " + exitCode(r)
	}
	return fmt.Sprintf("%-9s %-5s %-8s %-4s %s", oneLine(r.Ref), oneLine(r.Kind), oneLine(state), Age(now.Sub(r.StartedAt)), oneLine(r.Command))
}

// oneLine is s on one line, its control characters visible, its runs of
// white space one space.
func oneLine(s string) string { return strings.Join(strings.Fields(Visible(s)), " ") }

func exitCode(r protocol.Resource) string {
	if r.ExitCode == nil {
		return "?"
	}
	return fmt.Sprint(*r.ExitCode)
}

func exitText(r protocol.Resource) string {
	if r.ExitCode == nil {
		return "exit status unknown"
	}
	return "exit status " + exitCode(r)
}

// Age says how long ago something started, in its largest unit.
func Age(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
