package worker_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/link"
	"github.com/agentd-dev/agentd/internal/provider"
	"github.com/agentd-dev/agentd/internal/provider/anthropic"
	"github.com/agentd-dev/agentd/internal/provider/providertest"
	"github.com/agentd-dev/agentd/internal/transcript"
	"github.com/agentd-dev/agentd/internal/worker"
	"github.com/agentd-dev/agentd/protocol"
)

// Two replies of the Messages API's stream: a tool call, then an answer,
// each with the usage message_start and message_delta report.
const (
	toolUseReply = `event: message_start
data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"cache_read_input_tokens":1000,"cache_creation_input_tokens":0,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"bash","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"command\": \"echo hi\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":20}}

event: message_stop
data: {"type":"message_stop"}

`
	answerReply = `event: message_start
data: {"type":"message_start","message":{"id":"msg_2","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":150,"cache_read_input_tokens":1000,"cache_creation_input_tokens":0,"output_tokens":1}}}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"It printed hi."}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":10}}

event: message_stop
data: {"type":"message_stop"}

`
)

// A turn's usage is the sum of its model calls', priced for a model whose
// prices are known: on the run_end snapshot, on turn.query and on the
// turn_end record, and again on the snapshot after a restart.
func TestATurnsUsageSumsItsModelCallsAndIsRecorded(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{Body: toolUseReply}, providertest.Response{Body: answerReply})
	reg := provider.NewRegistry()
	reg.Register(anthropic.New(anthropic.Config{APIKey: "sk-ant-test", BaseURL: srv.URL, HTTPClient: srv.HTTPClient()}))
	cfg := worker.Config{Session: protocol.Session{Model: "anthropic/claude-sonnet-4-5"}, Approval: protocol.ApprovalAll, Providers: reg}
	r := startWorker(t, cfg)
	deltas := follow(t, r.conn)
	startTurn(t, r.conn, "t1", "run `echo hi`")
	seen := until(t, deltas, runEnd("t1"))

	// 250×3 + 30×15 + 2000×0.30 dollars per million tokens.
	check := func(where string, u protocol.TurnUsage) {
		t.Helper()
		if u.ModelCalls != 2 || u.InputTokens != 250 || u.OutputTokens != 30 || u.CacheReadTokens != 2000 || u.CacheWriteTokens != 0 {
			t.Errorf("%s: usage %+v, want 2 calls, 250 in, 30 out, 2000 read from the cache", where, u)
		}
		if math.Abs(u.CostUSD-0.0018) > 1e-12 {
			t.Errorf("%s: cost %v, want $0.0018", where, u.CostUSD)
		}
	}
	check("run_end", seen[len(seen)-1].Turn.Usage)
	snap, err := link.Call(agentdtest.Context(t), r.conn, protocol.OpTurnQuery, protocol.TurnRef{SessionID: "s1", TurnID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	check("turn.query", snap.Usage)

	r.stop(t)
	c, err := transcript.ReadAll(r.transcript)
	if err != nil {
		t.Fatal(err)
	}
	last := c.Records[len(c.Records)-1]
	var end protocol.TurnEndData
	if last.Type != protocol.RecordTurnEnd || json.Unmarshal(last.Data, &end) != nil {
		t.Fatalf("last record %s %s", last.Type, last.Data)
	}
	check("turn_end", end.Usage)

	cfg.TranscriptPath = r.transcript
	again := startWorker(t, cfg)
	got, err := link.Call(agentdtest.Context(t), again.conn, protocol.OpTurnQuery, protocol.TurnRef{SessionID: "s1", TurnID: "t1"})
	snap = got
	if err != nil {
		t.Fatal(err)
	}
	check("turn.query after a restart", snap.Usage)
}

// A model of a server at another base URL, whose prices are not known,
// shows its tokens and no cost.
func TestAModelOfAnotherServerShowsTokensAndNoCost(t *testing.T) {
	r, _ := startChat(t, t.TempDir(), chatReply)
	deltas := follow(t, r.conn)
	startTurn(t, r.conn, "t1", "hello")
	seen := until(t, deltas, runEnd("t1"))
	u := seen[len(seen)-1].Turn.Usage
	if u.ModelCalls != 1 || u.InputTokens != 200 || u.CacheReadTokens != 1000 || u.OutputTokens != 300 || u.CostUSD != 0 {
		t.Errorf("usage %+v, want 1 call, 200 in, 1000 read from the cache, 300 out, no cost", u)
	}
}
