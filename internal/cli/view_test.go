package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/tui"
	"github.com/agentd-dev/agentd/protocol"
)

// viewOn returns a lineView that writes lines to out.
func viewOn(out *strings.Builder) *lineView {
	feed := tui.NewFeed(0)
	feed.OnChange = tui.NewLines(out).Change
	return newLineView(feed.Delta, func(text string) { feed.Note(text, false) })
}

func live(d protocol.SessionDelta) client.SessionEvent { return client.SessionEvent{Delta: d} }

func toolDelta(event, id, output string, skipped int64) protocol.SessionDelta {
	return protocol.SessionDelta{Event: event, TurnID: "t1", Skipped: skipped, ToolCall: &protocol.ToolCallInfo{ID: id, Name: "bash", Output: output}}
}

func resultRecord(t *testing.T, seq uint64, id, content string) client.SessionEvent {
	t.Helper()
	data, _ := json.Marshal(protocol.MessageData{Role: "tool", Parts: []protocol.MessagePart{{Type: "tool_result", ToolResult: &protocol.ToolResultPart{CallID: id, Name: "bash", Content: content}}}})
	r := protocol.TranscriptRecord{Seq: seq, Type: protocol.RecordToolResults, TurnID: "t1", Data: data}
	entry, _ := json.Marshal(r)
	return client.SessionEvent{Delta: protocol.SessionDelta{Event: protocol.EventEntryAdded, TurnID: "t1", Entry: entry}, Record: &r}
}

func TestAnUpdateAfterSkippedBytesSaysHowManyAndGoesOn(t *testing.T) {
	var out strings.Builder
	v := viewOn(&out)
	v.event(live(protocol.SessionDelta{Event: protocol.EventMessageStart, TurnID: "t1", MessageID: "m1"}))
	v.event(live(protocol.SessionDelta{Event: protocol.EventMessageUpdate, TurnID: "t1", MessageID: "m1", Text: "the start "}))
	v.event(live(protocol.SessionDelta{Event: protocol.EventMessageUpdate, TurnID: "t1", MessageID: "m1", Text: "and the end", Skipped: 12_345_678}))
	v.event(live(protocol.SessionDelta{Event: protocol.EventMessageEnd, TurnID: "t1", MessageID: "m1", Text: "the start LEFT OUT and the end"}))
	v.event(live(toolDelta(protocol.EventToolCallStart, "c1", "", 0)))
	v.event(live(toolDelta(protocol.EventToolCallUpdate, "c1", "one\n", 0)))
	v.event(live(toolDelta(protocol.EventToolCallUpdate, "c1", "three\n", 4)))
	v.event(resultRecord(t, 5, "c1", "one\ntwo\nthree\nexit code 0"))
	got := out.String()
	for _, want := range []string{"… 12.3 MB skipped …", "the start \n", "and the end", "… 4 bytes skipped …", "│ one\n", "│ three\n", "│ exit code 0"} {
		if !strings.Contains(got, want) {
			t.Fatalf("no %q in:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"LEFT OUT", "two"} {
		if strings.Contains(got, unwanted) {
			t.Fatalf("the end showed %q again:\n%s", unwanted, got)
		}
	}
	if strings.Index(got, "12.3 MB skipped") > strings.Index(got, "and the end") {
		t.Fatalf("the skipped line does not come before the delta's text:\n%s", got)
	}
}

func TestAReopenedStreamRestoresARunningCallsOutputAndAddsOnlyWhatWasMissing(t *testing.T) {
	var out strings.Builder
	v := viewOn(&out)
	v.event(live(toolDelta(protocol.EventToolCallStart, "c1", "", 0)))
	v.event(live(toolDelta(protocol.EventToolCallUpdate, "c1", "line-1\n", 0)))
	// The stream ends; the next opens after record 4 with line-2 in the
	// call's output so far, and a reply streaming.
	v.opened(protocol.SessionProjection{
		TranscriptSequence: 4,
		ToolCalls:          []protocol.RunningToolCall{{TurnID: "t1", ID: "c1", Name: "bash", Output: "line-1\nline-2\n"}},
		Streams:            []protocol.MessageStream{{TurnID: "t1", MessageID: "m9", Text: "so far"}},
	}, 4)
	v.event(live(toolDelta(protocol.EventToolCallUpdate, "c1", "line-3\n", 0)))
	v.event(resultRecord(t, 5, "c1", "line-1\nline-2\nline-3\nexit code 0"))
	got := out.String()
	for _, line := range []string{"line-1\n", "line-2\n", "line-3\n", "exit code 0"} {
		if n := strings.Count(got, line); n != 1 {
			t.Fatalf("%q shown %d times:\n%s", line, n, got)
		}
	}
	if !strings.Contains(got, "so far") {
		t.Fatalf("the streaming reply is not shown:\n%s", got)
	}
}

func TestTheEndOfACallWhoseShownOutputItDidNotKeepSaysOutputWasSkipped(t *testing.T) {
	var out strings.Builder
	v := viewOn(&out)
	v.event(live(toolDelta(protocol.EventToolCallStart, "c1", "", 0)))
	v.event(live(toolDelta(protocol.EventToolCallUpdate, "c1", "1\n2\n3\n", 0)))
	// The call kept its output's head and tail; what was shown last was
	// in the middle it left out.
	v.event(resultRecord(t, 5, "c1", "1\n… 9 bytes omitted …\n8\n9\nexit code 0"))
	got := out.String()
	if n := strings.Count(got, "│ 1\n"); n != 1 || !strings.Contains(got, "… output skipped …") ||
		!strings.Contains(got, "│ 9\n") || !strings.Contains(got, "│ exit code 0") {
		t.Fatalf("the call's end:\n%s", got)
	}
}
