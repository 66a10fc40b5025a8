package tui

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/protocol"
)

func record(seq uint64, typ, turn string, data any) protocol.TranscriptRecord {
	b, _ := json.Marshal(data)
	return protocol.TranscriptRecord{Seq: seq, Time: time.Date(2026, 5, 4, 9, 31, 0, 0, time.UTC), Type: typ, TurnID: turn, Data: b}
}

// aTurn is the records of a turn that ran `echo hi` and answered.
func aTurn() []protocol.TranscriptRecord {
	return []protocol.TranscriptRecord{
		record(1, protocol.RecordTurnStart, "t1", protocol.TurnStartData{RunID: "run-t1", Text: "run `echo hi`"}),
		record(2, protocol.RecordUserMessage, "t1", protocol.UserMessageData{Text: "run `echo hi`"}),
		record(3, protocol.RecordAssistantMessage, "t1", protocol.MessageData{Role: "assistant", Parts: []protocol.MessagePart{
			{Type: protocol.PartText, Text: "Running it."},
			{Type: protocol.PartToolCall, ToolCall: &protocol.ToolCallPart{ID: "c1", Name: "bash", Arguments: json.RawMessage(`{"command":"echo hi"}`)}},
		}}),
		record(4, protocol.RecordToolResults, "t1", protocol.MessageData{Role: "tool", Parts: []protocol.MessagePart{
			{Type: protocol.PartToolResult, ToolResult: &protocol.ToolResultPart{CallID: "c1", Name: "bash", Content: "hi\n"}},
		}}),
		record(5, protocol.RecordAssistantMessage, "t1", protocol.MessageData{Role: "assistant", Parts: []protocol.MessagePart{{Type: protocol.PartText, Text: "It printed hi."}}}),
		record(6, protocol.RecordTurnEnd, "t1", protocol.TurnEndData{Status: protocol.TurnCompleted}),
	}
}

func entry(r protocol.TranscriptRecord) protocol.SessionDelta {
	b, _ := json.Marshal(r)
	return protocol.SessionDelta{Event: protocol.EventEntryAdded, TurnID: r.TurnID, Entry: b}
}

// liveTurn is the deltas of aTurn as a subscriber sees them, records
// included; cut, when positive, stops the first reply's text after that
// many of its updates, as a stream lost there would.
func liveTurn() []protocol.SessionDelta {
	rs := aTurn()
	turn := &protocol.TurnSnapshot{SessionID: "s", TurnID: "t1", RunID: "run-t1", Status: protocol.TurnRunning}
	done := &protocol.TurnSnapshot{SessionID: "s", TurnID: "t1", RunID: "run-t1", Status: protocol.TurnCompleted}
	return []protocol.SessionDelta{
		{Event: protocol.EventRunStart, TurnID: "t1", Turn: turn},
		entry(rs[0]), entry(rs[1]),
		{Event: protocol.EventMessageStart, TurnID: "t1", MessageID: "m1", Role: "assistant"},
		{Event: protocol.EventMessageUpdate, TurnID: "t1", MessageID: "m1", Text: "Running "},
		{Event: protocol.EventMessageUpdate, TurnID: "t1", MessageID: "m1", Text: "it."},
		{Event: protocol.EventMessageEnd, TurnID: "t1", MessageID: "m1", Role: "assistant", Text: "Running it."},
		entry(rs[2]),
		{Event: protocol.EventToolCallStart, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Arguments: json.RawMessage(`{"command":"echo hi"}`)}},
		{Event: protocol.EventToolCallUpdate, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Output: "hi\n"}},
		{Event: protocol.EventToolCallEnd, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Output: "hi\n"}},
		entry(rs[3]),
		{Event: protocol.EventMessageStart, TurnID: "t1", MessageID: "m2", Role: "assistant"},
		{Event: protocol.EventMessageUpdate, TurnID: "t1", MessageID: "m2", Text: "It printed hi."},
		{Event: protocol.EventMessageEnd, TurnID: "t1", MessageID: "m2", Role: "assistant", Text: "It printed hi."},
		entry(rs[4]),
		{Event: protocol.EventRunEnd, TurnID: "t1", Turn: done},
		entry(rs[5]),
	}
}

// lines renders what a feed shows, through Lines.
func lines(apply func(f *Feed)) string {
	var out strings.Builder
	f := NewFeed(0)
	f.OnChange = NewLines(&out).Change
	apply(f)
	return out.String()
}

const wantTurn = "── turn t1\n> run `echo hi`\nRunning it.\n→ $ echo hi\n  │ hi\nIt printed hi.\n── completed\n"

// TestAFeedShowsATurnOnceFromRecordsDeltasOrBoth: the records alone, the
// live deltas with their records, and a stream cut mid-reply then resumed
// with the records it lacked show the same blocks.
func TestAFeedShowsATurnOnceFromRecordsDeltasOrBoth(t *testing.T) {
	live := liveTurn()
	cases := map[string]func(f *Feed){
		"records": func(f *Feed) {
			for _, r := range aTurn() {
				f.Record(r)
			}
		},
		"live": func(f *Feed) {
			for _, d := range live {
				f.Delta(d)
			}
		},
		"records twice": func(f *Feed) {
			for _, r := range append(aTurn(), aTurn()...) {
				f.Record(r)
			}
		},
		"cut mid-reply, then resumed after record 2": func(f *Feed) {
			for _, d := range live[:5] { // "Running " streamed, then the stream is lost
				f.Delta(d)
			}
			f.Streams(nil) // reopened: the reply no longer streams
			for _, r := range aTurn()[2:] {
				f.Delta(entry(r))
			}
		},
	}
	for name, apply := range cases {
		got := lines(apply)
		if name == "records" || name == "records twice" {
			got = strings.Replace(got, " · "+aTurn()[0].Time.Local().Format("2006-01-02 15:04:05"), "", 1)
		}
		if got != wantTurn {
			t.Errorf("%s:\n%s\nwant:\n%s", name, got, wantTurn)
		}
	}
}

// TestAFeedShowsApprovalsAskedAndAnswered.
func TestAFeedShowsApprovalsAskedAndAnswered(t *testing.T) {
	in := protocol.Interaction{InteractionID: "i1", Kind: protocol.InteractionPermission, Prompt: "run bash: ls", State: protocol.InteractionPending}
	got := lines(func(f *Feed) {
		f.Delta(protocol.SessionDelta{Event: protocol.EventInteractionAdded, TurnID: "t1", Interaction: &in})
		answered := in
		answered.State, answered.Answer = protocol.InteractionAnswered, protocol.AnswerDeny
		f.Delta(protocol.SessionDelta{Event: protocol.EventInteractionResolved, TurnID: "t1", Interaction: &answered})
	})
	if want := "· waiting for approval: run bash: ls\n· denied: run bash: ls\n"; got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestVisibleShowsControlCharacters(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain text\n\ttabbed", "plain text\n\ttabbed"},
		{"\x1b[31mred\x1b[0m", "^[[31mred^[[0m"},
		{"\x1b]0;title\x07", "^[]0;title^G"},
		{"crlf\r\nline", "crlf\nline"},
		{"progress 10%\rprogress 20%", "progress 10%^Mprogress 20%"},
		{"del\x7f", "del^?"},
		{"csi\u009b2J", "csi^[[2J"},
		{"bad \xff utf-8", "bad \uFFFD utf-8"},
		{"unicode ✓ stays", "unicode ✓ stays"},
	}
	for _, c := range cases {
		if got := Visible(c.in); got != c.want {
			t.Errorf("Visible(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestLinesShowToolOutputMadeVisible: a tool's output reaches the lines
// with its escapes visible, each line under its call.
func TestLinesShowToolOutputMadeVisible(t *testing.T) {
	got := lines(func(f *Feed) {
		f.Delta(protocol.SessionDelta{Event: protocol.EventToolCallStart, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Arguments: json.RawMessage(`{"command":"printf"}`)}})
		f.Delta(protocol.SessionDelta{Event: protocol.EventToolCallUpdate, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Output: "\x1b[2Jone\ntw"}})
		f.Delta(protocol.SessionDelta{Event: protocol.EventToolCallUpdate, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Output: "o\n"}})
		f.Delta(protocol.SessionDelta{Event: protocol.EventToolCallEnd, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Output: "\x1b[2Jone\ntwo\nexit code 1", IsError: true}})
	})
	if want := "→ $ printf\n  │ ^[[2Jone\n  │ two\n  │ exit code 1\n"; got != want {
		t.Fatalf("got:\n%q\nwant:\n%q", got, want)
	}
}

func TestLinesShowAModelCallRetriedAndTheReplyAfter(t *testing.T) {
	var out strings.Builder
	f := NewFeed(0)
	f.OnChange = NewLines(&out).Change
	for _, d := range []protocol.SessionDelta{
		{Event: protocol.EventRunStart, TurnID: "t1", Turn: &protocol.TurnSnapshot{TurnID: "t1", Status: protocol.TurnRunning}},
		{Event: protocol.EventMessageStart, TurnID: "t1", MessageID: "m1", Role: "assistant"},
		{Event: protocol.EventModelRetry, TurnID: "t1", MessageID: "m1", Retry: &protocol.RetryNotice{Attempt: 1, MaxAttempts: 6, DelayMs: 1500, Reason: "anthropic: overloaded (HTTP 529)"}},
		{Event: protocol.EventMessageUpdate, TurnID: "t1", MessageID: "m1", Text: "Hello."},
		{Event: protocol.EventMessageEnd, TurnID: "t1", MessageID: "m1", Text: "Hello."},
	} {
		f.Delta(d)
	}
	want := "── turn t1\n· retrying in 2s: anthropic: overloaded (HTTP 529) (attempt 1 of 6 failed)\nHello.\n"
	if out.String() != want {
		t.Errorf("lines =\n%q\nwant\n%q", out.String(), want)
	}
}
