package worker

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentd-dev/agentd/protocol"
)

// TestALongUpdateIsWrittenInPiecesThatKeepItsRunes: split updates carry
// at most maxChunk each, cut between runes, and add up to the update.
func TestALongUpdateIsWrittenInPiecesThatKeepItsRunes(t *testing.T) {
	text := strings.Repeat("héllo wörld ✓ ", 20000) // multi-byte runes across every boundary
	for _, d := range []protocol.SessionDelta{
		{Event: protocol.EventMessageUpdate, TurnID: "t1", MessageID: "m1", Text: text, Thinking: text[:1000]},
		{Event: protocol.EventToolCallUpdate, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Output: text}},
	} {
		pieces := splitUpdate(d)
		if len(pieces) < 2 {
			t.Fatalf("%s of %d bytes in %d piece", d.Event, len(text), len(pieces))
		}
		var got, thinking strings.Builder
		for _, p := range pieces {
			s := p.Text
			if p.ToolCall != nil {
				s = p.ToolCall.Output
			}
			if len(s)+len(p.Thinking) > maxChunk || !utf8.ValidString(s) || !utf8.ValidString(p.Thinking) {
				t.Fatalf("a piece of %d bytes, valid %v", len(s)+len(p.Thinking), utf8.ValidString(s))
			}
			got.WriteString(s)
			thinking.WriteString(p.Thinking)
		}
		if got.String() != text || thinking.String() != d.Thinking {
			t.Fatalf("%s: the pieces add up to %d bytes, want %d", d.Event, got.Len(), len(text))
		}
		if d.ToolCall != nil && d.ToolCall.Output != text {
			t.Fatal("splitting changed the delta it was given")
		}
	}
}

// TestADeltaTooLargeForTheWireIsEncodedWithoutWhatDoesNotFit.
func TestADeltaTooLargeForTheWireIsEncodedWithoutWhatDoesNotFit(t *testing.T) {
	huge := strings.Repeat("y", protocol.MaxMessageBytes)
	for _, d := range []protocol.SessionDelta{
		{Event: protocol.EventMessageEnd, TurnID: "t1", MessageID: "m1", Text: huge},
		{Event: protocol.EventToolCallEnd, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "bash", Output: huge}},
		{Event: protocol.EventToolCallStart, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Name: "write", Arguments: json.RawMessage(`{"content":"` + huge + `"}`)}},
		{Event: protocol.EventEntryAdded, TurnID: "t1", Entry: json.RawMessage(`{"seq":7,"type":"tool_results","data":{"text":"` + huge + `"}}`)},
	} {
		b, ok := encodeDelta(d)
		if !ok || len(b) > maxDeltaBytes {
			t.Fatalf("%s: %d bytes, ok %v", d.Event, len(b), ok)
		}
		var got protocol.SessionDelta
		if err := json.Unmarshal(b, &got); err != nil || got.Event != d.Event {
			t.Fatalf("%s: %v", d.Event, err)
		}
		if d.Event == protocol.EventEntryAdded {
			var rec protocol.TranscriptRecord
			json.Unmarshal(got.Entry, &rec)
			if rec.Seq != 7 || rec.OmittedBytes == 0 {
				t.Fatalf("the record %+v", rec)
			}
		}
	}
}
