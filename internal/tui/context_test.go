package tui

import (
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/protocol"
)

// A turn's start that lists project instruction files shows them in one
// line, a cut file marked.
func TestATurnShowsTheInstructionFilesItsModelWasGiven(t *testing.T) {
	out := lines(func(f *Feed) {
		f.Record(record(1, protocol.RecordTurnStart, "t1", protocol.TurnStartData{RunID: "run-t1", Text: "hi", Instructions: []protocol.InstructionFile{
			{Path: "/p/AGENTS.md", Bytes: 10, Truncated: true},
			{Path: "/p/sub/CLAUDE.md", Bytes: 40},
		}}))
		f.Record(record(2, protocol.RecordUserMessage, "t1", protocol.UserMessageData{Text: "hi"}))
	})
	want := "── turn t1\n· instructions: /p/AGENTS.md (cut to 10 bytes), /p/sub/CLAUDE.md\n> hi\n"
	if out != want {
		t.Errorf("lines:\n%s\nwant:\n%s", out, want)
	}
	// Without instruction files there is no such line.
	if out := lines(func(f *Feed) {
		f.Record(record(1, protocol.RecordTurnStart, "t1", protocol.TurnStartData{RunID: "run-t1", Text: "hi"}))
	}); strings.Contains(out, "instructions") {
		t.Errorf("lines:\n%s", out)
	}
}

// A turn's end shows what its model calls used, and what it cost when
// that is known, whether it comes from the record or the live run_end.
func TestATurnsEndShowsItsUsage(t *testing.T) {
	u := protocol.TurnUsage{ModelCalls: 2, InputTokens: 250, OutputTokens: 30, CacheReadTokens: 2000, CostUSD: 0.0018}
	const want = "── completed · 2,250 tokens in (2,000 read from the cache), 30 out, 2 model calls, $0.0018\n"
	fromRecord := lines(func(f *Feed) {
		f.Record(record(1, protocol.RecordTurnEnd, "t1", protocol.TurnEndData{Status: protocol.TurnCompleted, Usage: u}))
	})
	fromDelta := lines(func(f *Feed) {
		f.Delta(protocol.SessionDelta{Event: protocol.EventRunEnd, TurnID: "t1", Turn: &protocol.TurnSnapshot{TurnID: "t1", Status: protocol.TurnCompleted, Usage: u}})
	})
	for name, got := range map[string]string{"record": fromRecord, "delta": fromDelta} {
		if got != want {
			t.Errorf("from the %s:\n%q\nwant\n%q", name, got, want)
		}
	}
	cases := []struct {
		u    protocol.TurnUsage
		want string
	}{
		{protocol.TurnUsage{ModelCalls: 1, InputTokens: 12, OutputTokens: 3}, "12 tokens in, 3 out, 1 model call"},
		{protocol.TurnUsage{ModelCalls: 3, InputTokens: 1234567, OutputTokens: 1000, CacheWriteTokens: 5}, "1,234,572 tokens in (5 written to the cache), 1,000 out, 3 model calls"},
	}
	for _, tc := range cases {
		if got := UsageText(tc.u); got != tc.want {
			t.Errorf("UsageText(%+v) = %q, want %q", tc.u, got, tc.want)
		}
	}
}
