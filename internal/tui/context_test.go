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
