package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd/internal/agent"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/provider"
	"github.com/agentd-dev/agentd/internal/provider/faux"
	"github.com/agentd-dev/agentd/internal/transcript"
	"github.com/agentd-dev/agentd/internal/worker"
	"github.com/agentd-dev/agentd/protocol"
)

// watched is the faux provider with what it was asked and answered kept:
// each request's size as the model counted it.
type watched struct {
	*faux.Provider
	mu       sync.Mutex
	requests []llm.Request
	counted  []int // the reported prompt tokens of each reply, summaries included
}

func (w *watched) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Reply, error) {
	reply, err := w.Provider.Stream(ctx, req, emit)
	w.mu.Lock()
	w.requests = append(w.requests, req)
	w.counted = append(w.counted, reply.Usage.InputTokens)
	w.mu.Unlock()
	return reply, err
}

func (w *watched) calls() ([]llm.Request, []int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]llm.Request(nil), w.requests...), append([]int(nil), w.counted...)
}

// startWindowed runs a worker whose faux model has the window script
// states, its replies scripted when script has them.
func startWindowed(t *testing.T, script, transcriptPath string, compactAt int) (*running, *watched) {
	t.Helper()
	s, err := faux.ParseScript([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	w := &watched{Provider: faux.NewScripted(s)}
	reg := provider.NewRegistry()
	reg.Register(w)
	return startWorker(t, worker.Config{
		Session: protocol.Session{Model: "faux/echo"}, Approval: protocol.ApprovalAll,
		TranscriptPath: transcriptPath, Providers: reg, CompactAt: compactAt,
	}), w
}

// prompt is a request of about n words, different for each i.
func prompt(i, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Request %d:", i)
	for j := range n {
		fmt.Fprintf(&b, " word%d", j)
	}
	return b.String()
}

func records(t *testing.T, path, typ string) []transcript.Record {
	t.Helper()
	c, err := transcript.ReadAll(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []transcript.Record
	for _, r := range c.Records {
		if r.Type == typ {
			out = append(out, r)
		}
	}
	return out
}

func TestAConversationNearItsWindowIsCompactedBeforeTheRequestAndStaysWithinTheBound(t *testing.T) {
	const window, compactAt = 4096, 80
	bound := window * compactAt / 100
	r, w := startWindowed(t, `{"contextWindow": 4096}`, "", 0)
	deltas := follow(t, r.conn)
	var compaction []protocol.CompactionInfo
	turns := 0
	for i := 1; len(records(t, r.transcript, protocol.RecordCompaction)) == 0; i++ {
		if i > 40 {
			t.Fatal("40 turns of 150 words each and no compaction")
		}
		id := fmt.Sprintf("t%d", i)
		startTurn(t, r.conn, id, prompt(i, 150))
		for _, d := range until(t, deltas, runEnd(id)) {
			if d.Event == protocol.EventCompaction {
				compaction = append(compaction, *d.Compaction)
			}
			if d.Event == protocol.EventRunEnd && d.Turn.Status != protocol.TurnCompleted {
				t.Fatalf("turn %s: %s %s", id, d.Turn.Status, d.Turn.Error)
			}
		}
		turns = i
	}
	if len(compaction) != 2 || compaction[0].State != protocol.CompactionStarted || compaction[1].State != protocol.CompactionFinished ||
		compaction[1].Trigger != protocol.CompactionAuto || compaction[1].ContextWindow != window {
		t.Fatalf("subscribers saw the compaction as %+v, want started then finished, auto, in a window of %d", compaction, window)
	}
	recs := records(t, r.transcript, protocol.RecordCompaction)
	var d protocol.CompactionData
	if err := json.Unmarshal(recs[0].Data, &d); err != nil {
		t.Fatal(err)
	}
	if d.Summary == "" || d.Messages < 2 || d.Trigger != protocol.CompactionAuto || d.TokensBefore <= bound || d.TokensAfter > bound || d.Model != "faux/echo" {
		t.Fatalf("compaction record %+v: want a summary of 2 or more messages, from over %d tokens to within it", d, bound)
	}
	// The originals stay.
	if n := len(records(t, r.transcript, protocol.RecordUserMessage)); n != turns {
		t.Fatalf("%d user messages recorded after %d turns", n, turns)
	}
	// One more turn: its request is the summary and the recent messages,
	// within the bound as the model counts it.
	startTurn(t, r.conn, "next", prompt(99, 150))
	until(t, deltas, runEnd("next"))
	reqs, counted := w.calls()
	last := reqs[len(reqs)-1]
	if !agent.IsSummary(last.Messages[0]) || !strings.Contains(last.Messages[0].Text(), d.Summary) {
		t.Fatalf("the next request does not open with the summary: %q", last.Messages[0].Text())
	}
	if strings.Contains(messagesText(last.Messages[1:]), "Request 1:") {
		t.Fatal("the next request still holds the first request, which was summarized")
	}
	if got := counted[len(counted)-1]; got > bound {
		t.Fatalf("the next request counted %d tokens; the bound is %d", got, bound)
	}
	for i, req := range reqs {
		if req.System != llm.SummarySystem && counted[i] > bound {
			t.Errorf("request %d counted %d tokens, past the bound of %d", i+1, counted[i], bound)
		}
	}
}

func messagesText(msgs []llm.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.Text())
		b.WriteByte('\n')
	}
	return b.String()
}

func TestACompactionAskedForSummarizesAllButTheKeptMessagesAndOutlivesTheWorker(t *testing.T) {
	path := ""
	r, w := startWindowed(t, `{"contextWindow": 200000}`, path, 0)
	deltas := follow(t, r.conn)
	for i := 1; i <= 4; i++ {
		id := fmt.Sprintf("t%d", i)
		startTurn(t, r.conn, id, prompt(i, 10))
		until(t, deltas, runEnd(id))
	}
	ctx := agentdtest.Context(t)
	if _, err := link.Call(ctx, r.conn, protocol.OpSessionCompact, protocol.CompactInput{SessionID: "s1", Keep: -1}); !failedWith(err, protocol.CodeInvalidRequest) || !strings.Contains(err.Error(), "input.keep") {
		t.Fatalf("keep -1: %v, want invalid_request naming input.keep", err)
	}
	res, err := link.Call(ctx, r.conn, protocol.OpSessionCompact, protocol.CompactInput{SessionID: "s1", Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Compaction.Messages != 6 || res.Compaction.Kept != 2 || res.Compaction.Trigger != protocol.CompactionManual || res.Sequence == 0 {
		t.Fatalf("compact: %+v, want 6 messages summarized, 2 kept, manual", res)
	}
	// The next worker rebuilds the same conversation from the transcript.
	transcriptPath := r.transcript
	r.stop(t)
	r2, w2 := startWindowed(t, `{"contextWindow": 200000}`, transcriptPath, 0)
	_ = w
	deltas2 := follow(t, r2.conn)
	startTurn(t, r2.conn, "t5", prompt(5, 10))
	until(t, deltas2, runEnd("t5"))
	reqs, _ := w2.calls()
	got := reqs[0].Messages
	if len(got) != 4 || !agent.IsSummary(got[0]) || !strings.Contains(got[1].Text(), "Request 4:") || !strings.Contains(got[3].Text(), "Request 5:") {
		t.Fatalf("after a restart the model is sent %d messages: %q", len(got), messagesText(got))
	}
}

func TestAFailingCompactionLeavesTheSessionAsItWasAndSaysWhy(t *testing.T) {
	// Two turns answered, then the summary fails, then a third turn.
	script := `{"contextWindow": 100000, "replies": [
		{"steps": [{"text": "one"}]},
		{"steps": [{"text": "two"}]},
		{"steps": [{"text": "three"}]}
	], "summaries": [
		{"steps": [{"error": {"status": 400, "message": "the summary was refused"}}]}
	]}`
	r, w := startWindowed(t, script, "", 0)
	deltas := follow(t, r.conn)
	startTurn(t, r.conn, "t1", "first")
	until(t, deltas, runEnd("t1"))
	startTurn(t, r.conn, "t2", "second")
	until(t, deltas, runEnd("t2"))
	before := records(t, r.transcript, protocol.RecordUserMessage)
	ctx := agentdtest.Context(t)
	_, err := link.Call(ctx, r.conn, protocol.OpSessionCompact, protocol.CompactInput{SessionID: "s1", Keep: 1})
	if !failedWith(err, protocol.CodeOperationUnavailable) || !strings.Contains(err.Error(), "the summary was refused") || !strings.Contains(err.Error(), "as it was") {
		t.Fatalf("compact: %v, want operation_unavailable saying why and that the session is as it was", err)
	}
	failed := until(t, deltas, func(d protocol.SessionDelta) bool {
		return d.Event == protocol.EventCompaction && d.Compaction.State == protocol.CompactionFailed
	})
	if e := failed[len(failed)-1].Compaction.Error; !strings.Contains(e, "the summary was refused") {
		t.Fatalf("subscribers were told %q", e)
	}
	if n := len(records(t, r.transcript, protocol.RecordCompaction)); n != 0 {
		t.Fatalf("%d compaction records after a failed compaction", n)
	}
	if n := len(records(t, r.transcript, protocol.RecordUserMessage)); n != len(before) {
		t.Fatal("the failed compaction changed the transcript")
	}
	startTurn(t, r.conn, "t3", "third")
	until(t, deltas, runEnd("t3"))
	reqs, _ := w.calls()
	last := reqs[len(reqs)-1]
	if len(last.Messages) != 5 || last.Messages[0].Text() != "first" {
		t.Fatalf("after a failed compaction the model is sent %q, want the whole conversation", messagesText(last.Messages))
	}
}

func TestTheCompactionThresholdIsTheSessionsOnceSetAndValidated(t *testing.T) {
	r, _ := startWindowed(t, `{"contextWindow": 4096}`, "", 70)
	ctx := agentdtest.Context(t)
	if _, err := link.Call(ctx, r.conn, protocol.OpSessionCompactionSet, protocol.CompactionSetInput{SessionID: "s1", CompactAt: 99}); !failedWith(err, protocol.CodeInvalidRequest) || !strings.Contains(err.Error(), "input.compactAt") {
		t.Fatalf("compactAt 99: %v, want invalid_request naming input.compactAt", err)
	}
	res, err := link.Call(ctx, r.conn, protocol.OpSessionCompactionSet, protocol.CompactionSetInput{SessionID: "s1", CompactAt: 50})
	if err != nil || res.CompactAt != 50 || res.ContextWindow != 4096 {
		t.Fatalf("set 50: %+v, %v", res, err)
	}
	res, err = link.Call(ctx, r.conn, protocol.OpSessionCompactionSet, protocol.CompactionSetInput{SessionID: "s1", CompactAt: 0})
	if err != nil || res.CompactAt != 70 {
		t.Fatalf("set 0: %+v, %v; want the host's 70 back", res, err)
	}
}
