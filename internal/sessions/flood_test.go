package sessions_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/protocol"
)

// slowReader reads at most rate bytes a second, in reads of at most 16
// KiB: a phone, an editor, a script decoding every frame.
type slowReader struct {
	r     io.Reader
	rate  float64
	start time.Time
	n     int64
}

func (s *slowReader) Read(p []byte) (int, error) {
	if len(p) > 16<<10 {
		p = p[:16<<10]
	}
	if s.start.IsZero() {
		s.start = time.Now()
	}
	if ahead := time.Duration(float64(s.n)/s.rate*float64(time.Second)) - time.Since(s.start); ahead > 0 {
		time.Sleep(ahead) // the reader's pace, not a wait for an event
	}
	n, err := s.r.Read(p)
	s.n += int64(n)
	return n, err
}

// readerSaw is what one reader of the flood saw.
type readerSaw struct {
	mu      sync.Mutex
	output  int64 // bytes of tool output delivered
	skipped int64 // and counted as skipped
	end     *protocol.TurnSnapshot
	err     error
	skips   chan struct{} // closed at its first skip
	done    chan struct{} // closed once it stopped reading
	once    sync.Once
}

func newReaderSaw() *readerSaw {
	return &readerSaw{skips: make(chan struct{}), done: make(chan struct{})}
}

// TestAFastToolWithThreeReadersKeepsTheWorkerAliveAndTheSlowReaderSubscribed:
// `yes` prints as fast as it can while three clients watch, one reading
// at about 1 MB/s, one reading nothing, one as fast as it can. The
// stalled one is closed as a slow consumer; the slow one skips ahead and
// stays subscribed; the worker lives on; an interrupt is answered; and
// both readers that read see the turn's end, their frames without a gap.
func TestAFastToolWithThreeReadersKeepsTheWorkerAliveAndTheSlowReaderSubscribed(t *testing.T) {
	h, c, work := newHost(t, time.Hour)
	ctx := agentdtest.Context(t)
	s, err := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: work, Approval: protocol.ApprovalAll})
	if err != nil {
		t.Fatal(err)
	}

	fast := h.Connect(t)
	fastW, _ := subscribe(t, fast, protocol.SubscriptionOpenInput{SessionID: s.SessionID})
	stalled := dialRaw(t, h.Endpoint())
	openRaw(t, stalled, s.SessionID)
	slowConn := dialRaw(t, h.Endpoint())
	slowID := openRaw(t, slowConn, s.SessionID)
	pid := workerPID(t, h.Home, s.SessionID)

	if _, err := client.Call(ctx, c, protocol.OpTurnStart, protocol.TurnStartInput{SessionID: s.SessionID, TurnID: "t1", Content: protocol.Content{Text: "run `yes`"}}); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	slow := newReaderSaw()
	wg.Go(func() { readSlowly(slowConn.nc, slowID, slow) })
	fastSaw := newReaderSaw()
	wg.Go(func() {
		for {
			d, _, err := nextDelta(ctx, fastW)
			if err != nil {
				fastSaw.finish(nil, err)
				return
			}
			if d.Event == protocol.EventRunEnd {
				fastSaw.finish(d.Turn, nil)
				return
			}
			fastSaw.add(d)
		}
	})

	// The slow reader skips ahead; the stalled one is closed.
	select {
	case <-slow.skips:
	case <-slow.done:
		t.Fatalf("the slow reader stopped: %+v", slow.snapshot())
	case <-ctx.Done():
		t.Fatalf("the slow reader never skipped ahead: %+v", slow.snapshot())
	}
	poll.Until(t, "the stalled subscription's closing", func() bool { return fanout(t, c).SlowConsumers >= 1 })

	asked := time.Now()
	_, err = client.Call(ctx, c, protocol.OpTurnInterrupt, protocol.TurnRef{SessionID: s.SessionID, TurnID: "t1"})
	if err != nil {
		t.Fatalf("turn.interrupt: %v", err)
	}
	t.Logf("the interrupt was answered in %v", time.Since(asked))
	wg.Wait()

	for name, saw := range map[string]*readerSaw{"slow": slow, "fast": fastSaw} {
		got := saw.snapshot()
		if got.err != nil || got.end == nil || got.end.Status != protocol.TurnInterrupted {
			t.Fatalf("the %s reader: %v, turn %+v", name, got.err, got.end)
		}
		t.Logf("the %s reader: %d bytes of output, %d skipped", name, got.output, got.skipped)
	}
	if err := syscall.Kill(pid, 0); err != nil || workerPID(t, h.Home, s.SessionID) != pid {
		t.Fatalf("the worker %d did not live on: %v", pid, err)
	}
	if got := fanout(t, c).SlowConsumers; got != 1 {
		t.Fatalf("%d subscriptions closed as slow consumers, want the stalled one", got)
	}
}

// openRaw opens and readies a subscription to session on rc.
func openRaw(t *testing.T, rc *rawConn, session string) string {
	t.Helper()
	rc.send(fmt.Sprintf(`{"requestId":"open","operation":"subscription.open","input":{"sessionId":%q,"transcript":{"kind":"none"}}}`, session))
	var res protocol.SubscriptionOpenResult
	if f := rc.next(); !f.OK || json.Unmarshal(f.Result, &res) != nil {
		t.Fatalf("subscription.open: %+v", f)
	}
	rc.send(fmt.Sprintf(`{"requestId":"ready","operation":"subscription.ready","input":{"subscriptionId":%q}}`, res.SubscriptionID))
	if f := rc.next(); !f.OK {
		t.Fatalf("subscription.ready: %+v", f)
	}
	return res.SubscriptionID
}

// readSlowly reads subscription id's frames from nc at about 1 MB/s until
// its turn ends, decoding every one.
func readSlowly(nc net.Conn, id string, saw *readerSaw) {
	nc.SetReadDeadline(time.Now().Add(agentdtest.Timeout))
	lr := protocol.NewLineReader(&slowReader{r: nc, rate: 1 << 20})
	var last uint64
	for {
		line, err := lr.Next()
		if err != nil {
			saw.finish(nil, err)
			return
		}
		var f frame
		if err := json.Unmarshal(line, &f); err != nil {
			saw.finish(nil, err)
			return
		}
		if f.SubscriptionID != id {
			continue
		}
		if f.Sequence != last+1 {
			saw.finish(nil, fmt.Errorf("sequence %d follows %d", f.Sequence, last))
			return
		}
		last = f.Sequence
		switch f.Kind {
		case protocol.KindSubscriptionClosed:
			saw.finish(nil, errors.New("closed: "+f.Reason))
			return
		case protocol.KindSessionDelta:
			var d protocol.SessionDelta
			if err := json.Unmarshal(f.Delta, &d); err != nil {
				saw.finish(nil, err)
				return
			}
			if d.Event == protocol.EventRunEnd {
				saw.finish(d.Turn, nil)
				return
			}
			saw.add(d)
		}
	}
}

func (s *readerSaw) add(d protocol.SessionDelta) {
	if d.Event != protocol.EventToolCallUpdate || d.ToolCall == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.output += int64(len(d.ToolCall.Output))
	s.skipped += d.Skipped
	if d.Skipped > 0 {
		s.once.Do(func() { close(s.skips) })
	}
}

func (s *readerSaw) finish(end *protocol.TurnSnapshot, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.end, s.err = end, err
	close(s.done)
}

func (s *readerSaw) snapshot() readerSaw {
	s.mu.Lock()
	defer s.mu.Unlock()
	return readerSaw{output: s.output, skipped: s.skipped, end: s.end, err: s.err}
}
