package tui

import (
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/protocol"
)

func notes(f *Feed) []*Block {
	var out []*Block
	for _, b := range f.Blocks {
		if b.Kind == BlockNote {
			out = append(out, b)
		}
	}
	return out
}

func TestACompactionShowsWhileItRunsThenWhereItStandsWithItsSummary(t *testing.T) {
	data := protocol.CompactionData{Summary: "Ada wants tabs.", Messages: 12, Kept: 4, Trigger: protocol.CompactionAuto, ContextWindow: 4096, TokensBefore: 3400, TokensAfter: 1900}
	f := NewFeed(0)
	f.Delta(protocol.SessionDelta{Event: protocol.EventCompaction, TurnID: "t3", Compaction: &protocol.CompactionInfo{State: protocol.CompactionStarted, Trigger: protocol.CompactionAuto, TokensBefore: 3400, ContextWindow: 4096}})
	if n := notes(f); len(n) != 1 || n[0].Done || !strings.Contains(n[0].Text, "compacting the context (auto): about 3,400 tokens of a 4,096-token window") {
		t.Fatalf("while it runs: %+v", n)
	}
	f.Delta(entry(record(40, protocol.RecordCompaction, "t3", data)))
	f.Delta(protocol.SessionDelta{Event: protocol.EventCompaction, TurnID: "t3", Compaction: &protocol.CompactionInfo{State: protocol.CompactionFinished, Trigger: protocol.CompactionAuto}})
	n := notes(f)
	if len(n) != 1 || !n[0].Done || n[0].Seq != 40 || !strings.Contains(n[0].Text, "context compacted here (automatic): 12 earlier messages summarized, 4 kept") || !strings.Contains(n[0].Text, "Ada wants tabs.") {
		t.Fatalf("once done: %+v", n)
	}
	// The log, from the records alone, shows the same mark.
	g := NewFeed(0)
	g.Record(record(40, protocol.RecordCompaction, "t3", data))
	if n := notes(g); len(n) != 1 || n[0].Text != notes(f)[0].Text {
		t.Fatalf("from the record: %+v", n)
	}
}

func TestAFailedCompactionSaysWhy(t *testing.T) {
	f := NewFeed(0)
	f.Delta(protocol.SessionDelta{Event: protocol.EventCompaction, Compaction: &protocol.CompactionInfo{State: protocol.CompactionStarted, Trigger: protocol.CompactionManual}})
	f.Delta(protocol.SessionDelta{Event: protocol.EventCompaction, Compaction: &protocol.CompactionInfo{State: protocol.CompactionFailed, Trigger: protocol.CompactionManual, Error: "overloaded"}})
	if n := notes(f); len(n) != 1 || !n[0].Error || !strings.Contains(n[0].Text, "the session is as it was: overloaded") {
		t.Fatalf("%+v", n)
	}
}
