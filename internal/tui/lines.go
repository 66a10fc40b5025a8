package tui

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Lines writes a feed's changes as lines of text, for a pipe, a file or a
// terminal that is not driven full-screen: replies as they stream, each
// tool call as "→ …" with its output indented under it, a turn's start and
// end as "── …" rules. Text from models and tools passes through Visible.
// It is not safe for concurrent use.
type Lines struct {
	// Color styles the renderer's own marks (arrows, rules, notes,
	// errors) for a terminal; text from models and tools is never styled.
	Color bool
	// Progress, for a terminal, lets Tick draw a spinner and the time
	// elapsed on the last line while a tool call runs with no output yet.
	Progress bool

	w       io.Writer
	cur     *Block // the block the last text was written for
	midLine bool   // the last line written is not finished
	status  bool   // the last line is Tick's, to be erased before anything else

	running []*Block             // tool calls written, not yet done
	since   map[*Block]time.Time // when each running call was first written
	frame   int                  // the spinner's frame
}

// NewLines returns a writer of lines to w.
func NewLines(w io.Writer) *Lines { return &Lines{w: w, since: map[*Block]time.Time{}} }

// Change writes one change; pass it as a Feed's OnChange.
func (l *Lines) Change(c Change) {
	b := c.Block
	switch {
	case c.New:
		l.endLine()
		l.head(b)
		switch b.Kind {
		case BlockAssistant:
			l.text(b, b.Text)
		case BlockTool:
			if !b.Done {
				l.running = append(l.running, b)
				l.since[b] = time.Now()
			}
			l.output(b, b.Tool.Output)
		}
	case c.Replaced:
		switch b.Kind {
		case BlockNote:
			l.endLine()
			l.head(b)
		case BlockAssistant:
			l.endLine()
			l.text(b, b.Text)
		case BlockTool:
			l.endLine()
			l.output(b, b.Tool.Output)
		}
	case c.Added != "":
		switch b.Kind {
		case BlockAssistant:
			l.text(b, c.Added)
		case BlockTool:
			l.output(b, c.Added)
		}
	}
	if c.Done {
		switch b.Kind {
		case BlockTool:
			l.stopped(b)
		case BlockNote:
			// An approval answered: the calls it held run from now.
			now := time.Now()
			for _, r := range l.running {
				l.since[r] = now
			}
		}
		if l.cur == b {
			l.endLine()
		}
	}
}

// stopped forgets a tool call that is done.
func (l *Lines) stopped(b *Block) {
	for i, r := range l.running {
		if r == b {
			l.running = append(l.running[:i], l.running[i+1:]...)
			break
		}
	}
	delete(l.since, b)
}

// Break ends the line being written, and erases Tick's, so that something
// else can be written on a line of its own.
func (l *Lines) Break() {
	l.endLine()
	l.clearStatus()
}

// spinner is the frames of Tick's spinner.
var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// Tick, with Progress set, draws the last line anew: a spinner, the tool
// call that runs with no output yet, and how long it has run. Anything
// written after it erases it first.
func (l *Lines) Tick(now time.Time) {
	if !l.Progress || l.midLine {
		return
	}
	var quiet *Block
	for _, b := range l.running {
		if b.Tool.Output == "" && !b.Done {
			quiet = b
			break
		}
	}
	if quiet == nil {
		l.clearStatus()
		return
	}
	l.frame = (l.frame + 1) % len(spinner)
	elapsed := now.Sub(l.since[quiet]).Truncate(time.Second)
	line := fmt.Sprintf("  %s %s · %s", l.style(styles().running, spinner[l.frame]), Visible(quiet.Tool.Name), elapsed)
	io.WriteString(l.w, "\r\x1b[K"+line)
	l.status = true
}

func (l *Lines) clearStatus() {
	if l.status {
		l.status = false
		io.WriteString(l.w, "\r\x1b[K")
	}
}

// write writes s, after erasing Tick's line.
func (l *Lines) write(s string) {
	l.clearStatus()
	io.WriteString(l.w, s)
}

// style renders a mark of the renderer's own in st when Color is set.
func (l *Lines) style(st paint, s string) string {
	if !l.Color {
		return s
	}
	return st.Render(s)
}

// head writes the line a block starts with.
func (l *Lines) head(b *Block) {
	rule := l.style(styles().dim, "──")
	switch b.Kind {
	case BlockTurn:
		if b.Time.IsZero() {
			l.write(fmt.Sprintf("%s %s\n", rule, l.style(styles().dim, "turn "+b.TurnID)))
		} else {
			l.write(fmt.Sprintf("%s %s\n", rule, l.style(styles().dim, "turn "+b.TurnID+" · "+b.Time.Local().Format("2006-01-02 15:04:05"))))
		}
	case BlockUser:
		mark := l.style(styles().user, ">")
		l.write(fmt.Sprintf("%s %s\n", mark, strings.ReplaceAll(Visible(b.Text), "\n", "\n"+mark+" ")))
	case BlockTool:
		l.write(fmt.Sprintf("%s %s\n", l.style(styles().tool, "→"), Visible(DescribeTool(b.Tool))))
	case BlockEnd:
		if b.Error {
			l.write(fmt.Sprintf("%s %s\n", l.style(styles().err, "──"), l.style(styles().err, Visible(b.Text))))
		} else {
			l.write(fmt.Sprintf("%s %s\n", rule, l.style(styles().dim, Visible(b.Text))))
		}
	case BlockNote:
		if b.Error {
			l.write(fmt.Sprintf("%s %s\n", l.style(styles().err, "·"), Visible(b.Text)))
		} else {
			l.write(fmt.Sprintf("%s %s\n", l.style(styles().ask, "·"), Visible(b.Text)))
		}
	}
}

func (l *Lines) text(b *Block, s string) {
	if s == "" {
		return
	}
	if l.cur != b {
		l.endLine()
	}
	l.cur = b
	s = Visible(s)
	l.write(s)
	l.midLine = !strings.HasSuffix(s, "\n")
}

// output writes tool output, each line indented under its call.
func (l *Lines) output(b *Block, s string) {
	if s == "" {
		return
	}
	if l.cur != b {
		l.endLine()
	}
	l.cur = b
	gutter := "  " + l.style(styles().dim, "│") + " "
	for _, line := range strings.SplitAfter(Visible(s), "\n") {
		if line == "" {
			continue
		}
		if !l.midLine {
			l.write(gutter)
		}
		l.write(line)
		l.midLine = !strings.HasSuffix(line, "\n")
	}
}

func (l *Lines) endLine() {
	if l.midLine {
		l.write("\n")
		l.midLine = false
	}
	l.cur = nil
}

// DescribeTool says in a few words what a tool call does: "$ go test" for
// a command, "read main.go" for a tool given a path, else the tool's name.
func DescribeTool(tc ToolCall) string {
	var args map[string]any
	json.Unmarshal(tc.Arguments, &args)
	if cmd, ok := args["command"].(string); ok {
		return "$ " + cmd
	}
	if path, ok := args["path"].(string); ok {
		return tc.Name + " " + path
	}
	if tc.Name == "" {
		return "tool"
	}
	return tc.Name
}
