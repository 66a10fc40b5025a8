package tui

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/protocol"
)

func toolDelta(event, output string) protocol.SessionDelta {
	return protocol.SessionDelta{Event: event, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Arguments: json.RawMessage(`{"command":"sleep 5"}`), Output: output}}
}

// TestLinesTickShowsASilentToolCallUntilItsOutput: with Progress, a tick
// draws a spinner and the time run under a call with no output yet; the
// next thing written erases it first, and a call with output, or done,
// gets no spinner.
func TestLinesTickShowsASilentToolCallUntilItsOutput(t *testing.T) {
	var out strings.Builder
	l := NewLines(&out)
	l.Progress = true
	f := NewFeed(0)
	f.OnChange = l.Change
	f.Delta(toolDelta(protocol.EventToolCallStart, ""))
	l.Tick(time.Now().Add(3 * time.Second))
	if got := out.String(); !regexp.MustCompile(`→ \$ sleep 5\n\r\x1b\[K  . bash · [0-9]+s$`).MatchString(got) {
		t.Fatalf("after a tick: %q", got)
	}
	out.Reset()
	f.Delta(toolDelta(protocol.EventToolCallUpdate, "done\n"))
	if got := out.String(); got != "\r\x1b[K  │ done\n" {
		t.Fatalf("output after a tick: %q", got)
	}
	out.Reset()
	l.Tick(time.Now())
	f.Delta(toolDelta(protocol.EventToolCallEnd, "done\n"))
	l.Tick(time.Now())
	if got := out.String(); got != "" {
		t.Fatalf("a tick under a call with output, or done, wrote %q", got)
	}
}

// TestLinesWithoutProgressOrColourWriteNoEscapes: lines for a pipe carry
// no escape of their own, ticks or not.
func TestLinesWithoutProgressOrColourWriteNoEscapes(t *testing.T) {
	var out strings.Builder
	l := NewLines(&out)
	f := NewFeed(0)
	f.OnChange = l.Change
	for _, d := range liveTurn() {
		f.Delta(d)
		l.Tick(time.Now())
	}
	if got := out.String(); got != wantTurn {
		t.Fatalf("got:\n%q\nwant:\n%q", got, wantTurn)
	}
}

// TestLinesColourTheirMarksNotTheText: with Color, the arrows, rules and
// gutters are styled and the text between them is as without it.
func TestLinesColourTheirMarksNotTheText(t *testing.T) {
	var out strings.Builder
	l := NewLines(&out)
	l.Color = true
	f := NewFeed(0)
	f.OnChange = l.Change
	for _, d := range liveTurn() {
		f.Delta(d)
	}
	got := out.String()
	if !strings.Contains(got, "\x1b[") {
		t.Fatalf("no colour: %q", got)
	}
	if plain := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(got, ""); plain != wantTurn {
		t.Fatalf("without its styles:\n%q\nwant:\n%q", plain, wantTurn)
	}
}

// FuzzLinesPassNoControlCharacter: whatever a model or a tool sends, the
// lines written, without colour or progress, hold no control character
// but newline and tab.
func FuzzLinesPassNoControlCharacter(f *testing.F) {
	f.Add("\x1b[2Jone\ntw", "o\r\n\x9b31m", "reply \x1b]0;title\x07")
	f.Add("", "\xff\xfe", "\r")
	f.Fuzz(func(t *testing.T, output, more, reply string) {
		var out strings.Builder
		feed := NewFeed(0)
		feed.OnChange = NewLines(&out).Change
		feed.Delta(protocol.SessionDelta{Event: protocol.EventToolCallStart, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: reply, Arguments: json.RawMessage(`{}`)}})
		feed.Delta(toolDelta(protocol.EventToolCallUpdate, output))
		feed.Delta(toolDelta(protocol.EventToolCallEnd, output+more))
		feed.Delta(protocol.SessionDelta{Event: protocol.EventMessageStart, TurnID: "t1", MessageID: "m1"})
		feed.Delta(protocol.SessionDelta{Event: protocol.EventMessageUpdate, TurnID: "t1", MessageID: "m1", Text: reply})
		feed.Delta(protocol.SessionDelta{Event: protocol.EventMessageEnd, TurnID: "t1", MessageID: "m1", Text: reply + more})
		for _, r := range out.String() {
			if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
				t.Fatalf("control character %U in %q", r, out.String())
			}
		}
	})
}
