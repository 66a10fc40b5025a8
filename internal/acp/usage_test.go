package acp

import (
	"encoding/json"
	"testing"

	"github.com/agentd-dev/agentd/protocol"
)

func compactionRecord(t *testing.T, turnID string, d protocol.CompactionData) protocol.TranscriptRecord {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return protocol.TranscriptRecord{Type: protocol.RecordCompaction, TurnID: turnID, Data: b}
}

// TestUsageIsTheLastContextAndTheSumOfWhatWasPaidOnce: the context is
// what the last turn or compaction left; the cost sums the turns and the
// compactions between turns, a compaction in a turn being in its turn's
// usage already; a record of no known window leaves the context as it was.
func TestUsageIsTheLastContextAndTheSumOfWhatWasPaidOnce(t *testing.T) {
	var u usage
	u.turn(protocol.TurnUsage{ContextTokens: 1000, ContextWindow: 8192, CostUSD: 0.5})
	u.compaction(compactionRecord(t, "t1", protocol.CompactionData{ContextWindow: 8192, TokensAfter: 300, Usage: protocol.TurnUsage{CostUSD: 0.25}}))
	if u.used != 300 || u.size != 8192 || u.cost != 0.5 {
		t.Fatalf("after a compaction in a turn: %+v", u)
	}
	u.compaction(compactionRecord(t, "", protocol.CompactionData{ContextWindow: 8192, TokensAfter: 200, Usage: protocol.TurnUsage{CostUSD: 0.25}}))
	if u.used != 200 || u.cost != 0.75 || !u.priced {
		t.Fatalf("after a compaction between turns: %+v", u)
	}
	u.turn(protocol.TurnUsage{InputTokens: 5}) // written before the context was kept
	if u.used != 200 || u.size != 8192 || u.cost != 0.75 {
		t.Fatalf("after a turn of no known window: %+v", u)
	}
}
