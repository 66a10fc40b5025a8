package tui

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Lines writes a feed's changes as lines of text, for a pipe, a file or a
// terminal that is not driven full-screen: replies as they stream, each
// tool call as "→ …" with its output indented under it, a turn's start and
// end as "── …" rules. Text from models and tools passes through Visible.
type Lines struct {
	w       io.Writer
	cur     *Block // the block the last text was written for
	midLine bool   // the last line written is not finished
}

// NewLines returns a writer of lines to w.
func NewLines(w io.Writer) *Lines { return &Lines{w: w} }

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
	if c.Done && l.cur == b {
		l.endLine()
	}
}

// head writes the line a block starts with.
func (l *Lines) head(b *Block) {
	switch b.Kind {
	case BlockTurn:
		if b.Time.IsZero() {
			fmt.Fprintf(l.w, "── turn %s\n", b.TurnID)
		} else {
			fmt.Fprintf(l.w, "── turn %s · %s\n", b.TurnID, b.Time.Local().Format("2006-01-02 15:04:05"))
		}
	case BlockUser:
		fmt.Fprintf(l.w, "> %s\n", strings.ReplaceAll(Visible(b.Text), "\n", "\n> "))
	case BlockTool:
		fmt.Fprintf(l.w, "→ %s\n", Visible(DescribeTool(b.Tool)))
	case BlockEnd:
		fmt.Fprintf(l.w, "── %s\n", Visible(b.Text))
	case BlockNote:
		fmt.Fprintf(l.w, "· %s\n", Visible(b.Text))
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
	io.WriteString(l.w, s)
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
	for _, line := range strings.SplitAfter(Visible(s), "\n") {
		if line == "" {
			continue
		}
		if !l.midLine {
			io.WriteString(l.w, "  │ ")
		}
		io.WriteString(l.w, line)
		l.midLine = !strings.HasSuffix(line, "\n")
	}
}

func (l *Lines) endLine() {
	if l.midLine {
		io.WriteString(l.w, "\n")
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
