package sessions

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/fanout"
	"github.com/agentd-dev/agentd/protocol"
)

// TestAToolsOutputIsDeliveredOrCountedAsSkipped: a tool call's updates,
// some carrying what the worker skipped, interleaved with records, through
// one subscription's queue to a consumer slower than them: every byte of
// output is delivered in order or counted by the delta after it, and the
// records arrive whole.
func TestAToolsOutputIsDeliveredOrCountedAsSkipped(t *testing.T) {
	for seed := range uint64(8) {
		r := rand.New(rand.NewPCG(seed, 1))
		var counters fanout.Counters
		q := fanout.New[*pending](fanout.Config{
			LiveBytes: 1 + r.IntN(256<<10), LiveAge: time.Duration(r.IntN(2)) * time.Millisecond, RecordBytes: 1 << 30,
			StallAge: time.Hour, BatchBytes: batchBytes, BatchItems: batchFrames,
		}, &counters)
		q.Start()
		var sent strings.Builder
		var records int
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 1000 {
				var d protocol.SessionDelta
				if r.IntN(10) == 0 {
					records++
					d = protocol.SessionDelta{Event: protocol.EventQueueChanged, TurnID: "t1"}
				} else {
					out := strings.Repeat(string(rune('a'+r.IntN(26))), 1+r.IntN(8<<10))
					d = protocol.SessionDelta{Event: protocol.EventToolCallUpdate, TurnID: "t1", ToolCall: &protocol.ToolCallInfo{ID: "c1", Output: out}}
					if r.IntN(20) == 0 {
						d.Skipped = int64(1 + r.IntN(100)) // what the worker left out
						sent.WriteString(strings.Repeat("?", int(d.Skipped)))
					}
					sent.WriteString(out)
				}
				body, _ := json.Marshal(d)
				q.Push(newPending(newDeltaItem(body, &d)))
				if r.IntN(50) == 0 {
					time.Sleep(time.Millisecond)
				}
			}
			q.Close(fanout.Reason("done"))
		}()
		var got strings.Builder
		var gotRecords int
		var batch []*pending
		for {
			var err error
			batch, err = q.Next(context.Background(), batch)
			if err != nil {
				break
			}
			for _, p := range batch {
				var d protocol.SessionDelta
				if err := json.Unmarshal(p.encoded(), &d); err != nil {
					t.Fatal(err)
				}
				p.Release()
				if d.Event == protocol.EventQueueChanged {
					gotRecords++
					continue
				}
				got.WriteString(strings.Repeat("?", int(d.Skipped)))
				got.WriteString(d.ToolCall.Output)
			}
			time.Sleep(100 * time.Microsecond)
		}
		<-done
		if gotRecords != records {
			t.Fatalf("seed %d: %d records of %d", seed, gotRecords, records)
		}
		want := sent.String()
		if got.Len() != len(want) {
			t.Fatalf("seed %d: %d bytes accounted for of %d (skipped %d)", seed, got.Len(), len(want), counters.SkippedBytes.Load())
		}
		// Every byte delivered is where it was sent.
		g := got.String()
		for i := range g {
			if g[i] != '?' && g[i] != want[i] {
				t.Fatalf("seed %d: byte %d is %q, sent %q", seed, i, g[i], want[i])
			}
		}
	}
}
