package tui

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/agentd-dev/agentd/protocol"
)

// screenStyles are the styles of the screen.
type screenStyles struct {
	dim, header, user, tool, toolOK, err, ask, running paint
	mdCode, mdLink                                     lipgloss.Style // Markdown's code and links
}

// styles are made the first time a screen is drawn, not when a process
// starts: most agentd processes never draw one.
var styles = sync.OnceValue(func() *screenStyles {
	return &screenStyles{
		dim:     newPaint(lipgloss.NewStyle().Foreground(lipgloss.Color("8"))),
		header:  newPaint(lipgloss.NewStyle().Bold(true)),
		user:    newPaint(lipgloss.NewStyle().Foreground(lipgloss.Color("12")).Bold(true)),
		tool:    newPaint(lipgloss.NewStyle().Foreground(lipgloss.Color("11"))),
		toolOK:  newPaint(lipgloss.NewStyle().Foreground(lipgloss.Color("10"))),
		err:     newPaint(lipgloss.NewStyle().Foreground(lipgloss.Color("9"))),
		ask:     newPaint(lipgloss.NewStyle().Foreground(lipgloss.Color("13")).Bold(true)),
		running: newPaint(lipgloss.NewStyle().Foreground(lipgloss.Color("11")).Bold(true)),
		mdCode:  lipgloss.NewStyle().Foreground(lipgloss.Color("6")),
		mdLink:  lipgloss.NewStyle().Foreground(lipgloss.Color("12")),
	}
})

// toolLines bounds the output lines a tool call shows: its last ones.
const toolLines = 30

// helpKeys are the keys the help line names, in the order it shows them,
// each with its rank: a narrow screen leaves out the least needed first,
// rather than cutting the line off.
var helpKeys = []struct {
	text string
	rank int
}{
	{"enter send", 0}, {"alt+enter queue", 4}, {"esc interrupt", 1}, {"ctrl+c ×2 stop", 5},
	{"ctrl+\\ detach", 2}, {"tab resources", 3}, {"pgup/pgdn scroll", 6},
}

// helpLine names the keys that fit in width.
func helpLine(width int) string {
	var line string
	for most := len(helpKeys) - 1; most >= 0; most-- {
		var shown []string
		for _, k := range helpKeys {
			if k.rank <= most {
				shown = append(shown, k.text)
			}
		}
		line = strings.Join(shown, " · ")
		if lipgloss.Width(line) <= width {
			break
		}
	}
	return line
}

// renderer renders blocks at a width, keeping what it rendered while the
// block has not changed.
type renderer struct {
	width int
	cache map[*Block]rendered
}

type rendered struct {
	key string
	out string
}

func newRenderer() *renderer { return &renderer{cache: map[*Block]rendered{}} }

func (r *renderer) setWidth(w int) {
	if w == r.width {
		return
	}
	r.width, r.cache = w, map[*Block]rendered{}
}

// block renders b, with a mark at each place its stream skipped and
// the notes drawn inside it, or returns "" for a block that shows
// nothing.
func (r *renderer) block(b *Block, skips []skip, notes []placedNote) string {
	key := fmt.Sprintf("%d/%d/%d/%t/%t/%d/%v", len(b.Text), len(b.Tool.Output), b.Seq, b.Done, b.Error, b.Kind, skips)
	for _, n := range notes {
		key += fmt.Sprintf("/%d:%s:%t", n.at, n.note.Text, n.note.Error)
	}
	if c, ok := r.cache[b]; ok && c.key == key {
		return c.out
	}
	out := r.draw(b, skips, notes)
	r.cache[b] = rendered{key, out}
	return out
}

func (r *renderer) wrap(s string) string { return wrapTo(s, r.width) }

func (r *renderer) draw(b *Block, skips []skip, notes []placedNote) string {
	switch b.Kind {
	case BlockTurn:
		s := "── turn " + b.TurnID
		if !b.Time.IsZero() {
			s += " · " + b.Time.Local().Format("2006-01-02 15:04")
		}
		return styles().dim.Render(s)
	case BlockUser:
		label := "❯ "
		if b.Steering {
			label = "❯ (into the turn) "
		}
		return styles().user.Render(r.wrap(label + plain(b.Text)))
	case BlockAssistant:
		text := plain(b.Text)
		if strings.TrimSpace(text) == "" {
			return ""
		}
		if b.Done {
			return Markdown(text, r.width)
		}
		if len(skips) > 0 {
			pieces, between := split(b.Text, skips)
			var s strings.Builder
			s.WriteString(plain(pieces[0]))
			for i, sk := range between {
				s.WriteString("\n" + styles().dim.Render(skippedText(sk.n)) + "\n")
				s.WriteString(plain(pieces[i+1]))
			}
			text = s.String()
		}
		return r.wrap(text)
	case BlockTool:
		head, style := "● ", styles().tool
		switch {
		case b.Done && b.Error:
			style = styles().err
		case b.Done:
			style = styles().toolOK
		}
		lines := []string{style.Render(r.wrap(head + plain(DescribeTool(b.Tool))))}
		// The marks of skipped output and the notes, each where the
		// output was when it came.
		type mark struct {
			at   int
			line string
		}
		var marks []mark
		for _, sk := range skips {
			marks = append(marks, mark{sk.at, styles().dim.Render("  │ " + truncate(skippedText(sk.n), r.width-4))})
		}
		for _, n := range notes {
			marks = append(marks, mark{n.at, r.draw(n.note, nil, nil)})
		}
		slices.SortStableFunc(marks, func(a, b mark) int { return cmp.Compare(a.at, b.at) })
		var out []string
		prev := 0
		for _, mk := range marks {
			at := min(max(mk.at, prev), len(b.Tool.Output))
			out = append(r.outputLines(out, b.Tool.Output[prev:at]), mk.line)
			prev = at
		}
		out = r.outputLines(out, b.Tool.Output[prev:])
		if len(out) > toolLines {
			lines = append(lines, styles().dim.Render(fmt.Sprintf("  │ … %d lines above", len(out)-toolLines)))
			out = out[len(out)-toolLines:]
		}
		return strings.Join(append(lines, out...), "\n")
	case BlockEnd:
		if b.Error {
			return styles().err.Render("── " + plain(b.Text))
		}
		return styles().dim.Render("── " + plain(b.Text))
	case BlockNote:
		if b.Error {
			return styles().err.Render(r.wrap("· " + plain(b.Text)))
		}
		return styles().dim.Render(r.wrap("· " + plain(b.Text)))
	}
	return ""
}

// outputLines appends to lines those of a tool's output, each drawn
// under the tool's header.
func (r *renderer) outputLines(lines []string, output string) []string {
	out := strings.TrimRight(plain(output), "\n")
	if out == "" {
		return lines
	}
	for l := range strings.SplitSeq(out, "\n") {
		lines = append(lines, styles().dim.Render("  │ ")+truncate(l, r.width-4))
	}
	return lines
}

// plain makes text from a model or a tool safe to draw: its control
// characters visible, its tabs spaces.
func plain(s string) string {
	return strings.ReplaceAll(Visible(s), "\t", "    ")
}

// truncate cuts a line to width cells.
func truncate(s string, width int) string {
	if width < 1 {
		return ""
	}
	if lipgloss.Width(s) <= width {
		return s
	}
	rs := []rune(s)
	for len(rs) > 0 && lipgloss.Width(string(rs)) > width-1 {
		rs = rs[:len(rs)-1]
	}
	return string(rs) + "…"
}

// refresh lays the screen out again after a change. The oldest blocks of
// the history that hideOlder left out are not drawn.
func (m *model) refresh() {
	if m.width == 0 {
		return
	}
	m.render.setWidth(m.width)
	var parts []string
	for _, bs := range [][]*Block{m.history[m.hidden:], m.feed.Blocks} {
		for _, b := range bs {
			if b.Done {
				delete(m.skips, b) // its whole text replaced what streamed
			}
			if m.placed[b] {
				continue // drawn inside its tool call's block
			}
			if s := m.render.block(b, m.skips[b], m.inTool[b]); s != "" {
				parts = append(parts, s)
			}
		}
	}
	m.lines = strings.Split(strings.Join(parts, "\n"), "\n")
	// The view keeps the scroll position over the lines, which transcript
	// draws: it is given as many blank ones, rather than measure each
	// line's width for a sideways scroll the screen does not have. One
	// line it is given as it is: a blank one is none.
	inView := m.lines
	if len(inView) > 1 {
		inView = make([]string, len(m.lines))
	}
	m.view.SetContentLines(inView)
	m.layout()
}

// hideOlder leaves out of the view, while it follows the transcript's
// end, the oldest blocks of the history that a full screen does not
// need: a first screen draws only the newest records that fit. They are
// drawn once the person scrolls up (showAll).
func (m *model) hideOlder() {
	if m.width == 0 || !m.follow {
		return
	}
	m.render.setWidth(m.width)
	lines := 0
	for _, b := range m.feed.Blocks {
		lines += m.blockLines(b)
	}
	m.hidden = 0
	for i := len(m.history) - 1; i > 0 && lines < m.height; i-- {
		lines += m.blockLines(m.history[i])
		if lines >= m.height {
			m.hidden = i
		}
	}
}

// blockLines returns how many lines block b takes on the screen.
func (m *model) blockLines(b *Block) int {
	if m.placed[b] {
		return 0
	}
	s := m.render.block(b, m.skips[b], m.inTool[b])
	if s == "" {
		return 0
	}
	return strings.Count(s, "\n") + 1
}

// showAll draws the blocks hideOlder left out, above what the view
// shows, which stays where it is.
func (m *model) showAll() {
	if m.hidden == 0 {
		return
	}
	before, at := m.view.TotalLineCount(), m.view.YOffset()
	m.hidden = 0
	m.refresh()
	m.view.SetYOffset(at + m.view.TotalLineCount() - before)
}

// transcript is what the transcript's view shows: its lines from its
// offset, as many as its height, a line wider than the screen cut. The
// viewport's own View pads each line to the width through lipgloss
// besides, which the terminal's renderer has no need of, at six times
// the cost a frame.
func (m *model) transcript() string {
	h := m.view.Height()
	if m.width == 0 || h == 0 {
		return ""
	}
	top := min(m.view.YOffset(), len(m.lines))
	shown := make([]string, h)
	for i, l := range m.lines[top:min(top+h, len(m.lines))] {
		if cells(l) > m.width {
			l = ansi.Truncate(l, m.width, "")
		}
		shown[i] = l
	}
	return strings.Join(shown, "\n")
}

// layout sizes the transcript's view to the room the rest leaves it.
func (m *model) layout() {
	if m.width == 0 {
		return
	}
	m.view.SetWidth(m.width)
	m.view.SetHeight(max(m.height-lipgloss.Height(m.header())-lipgloss.Height(m.panel())-2, 1))
	if m.follow {
		m.view.GotoBottom()
	}
}

// header is the screen's first line: the session and its state.
func (m *model) header() string {
	p := m.proj.Projection()
	s := p.Session
	status := s.Status
	if _, running := m.running(); running && (status == "" || status == protocol.SessionIdle) {
		// The session's own status follows its turn's a step behind.
		status = protocol.SessionRunning
	}
	if status == "" {
		status = protocol.SessionIdle
	}
	st := styles().dim
	if status != protocol.SessionIdle {
		st = styles().running
	}
	parts := []string{styles().header.Render("agentd · " + s.SessionID)}
	if s.Title != "" {
		parts = append(parts, plain(s.Title))
	}
	if s.Model != "" {
		parts = append(parts, s.Model)
	}
	switch {
	case s.Sandbox == protocol.SandboxFull:
		parts = append(parts, styles().err.Render("no sandbox"))
	case s.Sandbox != "" && s.Network == protocol.NetworkOff:
		parts = append(parts, "sandbox "+s.Sandbox+", no network")
	case s.Sandbox != "":
		parts = append(parts, "sandbox "+s.Sandbox)
	}
	parts = append(parts, st.Render(status))
	line := strings.Join(parts, " · ")
	if m.conn != "" {
		line += " · " + styles().err.Render(m.conn)
	}
	return truncate(line, m.width)
}

// panel is what stands between the transcript and the input: the plan, the
// queue, the approval waiting, a message for the person.
func (m *model) panel() string {
	p := m.proj.Projection()
	var lines []string
	if len(p.Todo) > 0 {
		lines = append(lines, styles().dim.Render("plan"))
		for _, t := range p.Todo {
			mark := "[ ]"
			switch t.Status {
			case "done":
				mark = "[x]"
			case "in_progress":
				mark = "[~]"
			}
			lines = append(lines, truncate("  "+mark+" "+plain(t.Text), m.width))
		}
	}
	for _, q := range p.Queue.Steering {
		lines = append(lines, truncate(styles().dim.Render("steering: ")+plain(firstLine(q.Content.Text)), m.width))
	}
	for _, q := range p.Queue.FollowUp {
		lines = append(lines, truncate(styles().dim.Render("queued: ")+plain(firstLine(q.Content.Text)), m.width))
	}
	if ins := m.pending(); len(ins) > 0 {
		s := fmt.Sprintf("? %s   y allow · n deny · a allow %s always", plain(ins[0].Prompt), plain(ins[0].Tool()))
		if len(ins) > 1 {
			s += fmt.Sprintf(" (%d more)", len(ins)-1)
		}
		lines = append(lines, styles().ask.Render(wrapTo(s, m.width)))
	}
	lines = append(lines, m.resourceLines()...)
	if m.flash != "" {
		lines = append(lines, styles().err.Render(truncate(plain(m.flash), m.width)))
	}
	return strings.Join(lines, "\n")
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func (m *model) View() tea.View {
	var b strings.Builder
	b.WriteString(m.header())
	b.WriteString("\n")
	b.WriteString(m.transcript())
	if panel := m.panel(); panel != "" {
		b.WriteString("\n")
		b.WriteString(panel)
	}
	b.WriteString("\n")
	b.WriteString(m.input.View())
	b.WriteString("\n")
	help := helpLine(m.width)
	if m.paneOpen {
		help = paneHelp
	}
	b.WriteString(styles().dim.Render(truncate(help, m.width)))
	v := tea.NewView(b.String())
	v.AltScreen = true
	return v
}
