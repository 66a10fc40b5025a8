package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/tools"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// model stands in for a model endpoint: it answers each call with the next
// scripted reply and records the requests.
type model struct {
	mu       sync.Mutex
	replies  []llm.Message
	requests []llm.Request
	onCall   func(n int)
}

func (m *model) Name() string     { return "test" }
func (m *model) Models() []string { return []string{"m"} }

func (m *model) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Reply, error) {
	m.mu.Lock()
	m.requests = append(m.requests, req)
	n := len(m.requests)
	if len(m.replies) == 0 {
		m.mu.Unlock()
		return llm.Reply{}, errors.New("script exhausted")
	}
	reply := m.replies[0]
	m.replies = m.replies[1:]
	m.mu.Unlock()
	if m.onCall != nil {
		m.onCall(n)
	}
	if err := ctx.Err(); err != nil {
		return llm.Reply{}, err
	}
	for _, p := range reply.Parts {
		if p.Type == llm.PartText {
			emit(llm.Event{Kind: llm.EventText, Text: p.Text})
		}
	}
	return llm.Reply{Message: reply}, nil
}

func text(s string) llm.Message {
	return llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartText, Text: s}}}
}

func call(id, name, args string) llm.Message {
	return llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}}}}
}

func user(s string) []llm.Message {
	return []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartText, Text: s}}}}
}

func newLoop(t *testing.T, m *model) (*Loop, *[]Event) {
	var events []Event
	var mu sync.Mutex
	return &Loop{
		Provider: m, Model: "m", Tools: tools.Builtin(), Env: &tools.Env{Cwd: t.TempDir(), Todo: &tools.Todo{}},
		Emit: func(e Event) { mu.Lock(); events = append(events, e); mu.Unlock() },
	}, &events
}

func toolResults(req llm.Request) []llm.ToolResult {
	var out []llm.ToolResult
	for _, p := range req.Messages[len(req.Messages)-1].Parts {
		if p.ToolResult != nil {
			out = append(out, *p.ToolResult)
		}
	}
	return out
}

func TestLoopRunsToolsAndFeedsResultsBack(t *testing.T) {
	m := &model{replies: []llm.Message{call("c1", "bash", `{"command":"echo from-bash"}`), text("done")}}
	l, events := newLoop(t, m)
	var committed []llm.Message
	l.Commit = func(msg llm.Message) error { committed = append(committed, msg); return nil }
	outcome, err := l.Run(context.Background(), user("go"))
	if err != nil || outcome != OutcomeCompleted {
		t.Fatalf("run: %q %v", outcome, err)
	}
	res := toolResults(m.requests[1])
	if len(res) != 1 || !strings.Contains(res[0].Content, "from-bash") || res[0].IsError {
		t.Fatalf("tool results sent back: %+v", res)
	}
	if len(committed) != 3 || committed[2].Text() != "done" {
		t.Fatalf("committed %+v", committed)
	}
	var kinds []string
	for _, e := range *events {
		kinds = append(kinds, e.Kind)
	}
	if !strings.Contains(strings.Join(kinds, " "), "tool_call_start tool_call_update tool_call_end") {
		t.Fatalf("events %v", kinds)
	}
}

func TestBadToolArgumentsBecomeAnErrorResultAndTheTurnGoesOn(t *testing.T) {
	m := &model{replies: []llm.Message{
		call("c1", "edit", `{"path":7}`),
		call("c2", "nosuch", `{}`),
		call("c3", "read", `not json`),
		text("recovered"),
	}}
	l, _ := newLoop(t, m)
	if outcome, err := l.Run(context.Background(), user("go")); err != nil || outcome != OutcomeCompleted {
		t.Fatalf("run: %q %v", outcome, err)
	}
	for i, want := range []string{"path", "no tool named", "not valid JSON"} {
		res := toolResults(m.requests[i+1])
		if len(res) != 1 || !res[0].IsError || !strings.Contains(res[0].Content, want) {
			t.Errorf("result %d: %+v, want an error mentioning %q", i, res, want)
		}
	}
}

func TestDeniedToolCallIsNotRun(t *testing.T) {
	dir := t.TempDir()
	m := &model{replies: []llm.Message{call("c1", "write", `{"path":"x.txt","content":"hi"}`), text("ok")}}
	l, _ := newLoop(t, m)
	l.Env.Cwd = dir
	var asked []string
	l.Approve = func(_ context.Context, c llm.ToolCall, tool tools.Tool) (Decision, error) {
		asked = append(asked, c.Name)
		return Decision{Reason: "no thanks"}, nil
	}
	if _, err := l.Run(context.Background(), user("go")); err != nil {
		t.Fatal(err)
	}
	if res := toolResults(m.requests[1]); len(res) != 1 || !strings.Contains(res[0].Content, "no thanks") {
		t.Fatalf("results %+v", res)
	}
	if len(asked) != 1 {
		t.Fatalf("asked %v", asked)
	}
}

func TestStopEndsAfterTheCurrentStep(t *testing.T) {
	m := &model{replies: []llm.Message{call("c1", "ls", `{}`), text("never")}}
	l, _ := newLoop(t, m)
	m.onCall = func(int) { l.Stop() }
	outcome, err := l.Run(context.Background(), user("go"))
	if err != nil || outcome != OutcomeStopped || len(m.requests) != 1 {
		t.Fatalf("run: %q %v after %d calls", outcome, err, len(m.requests))
	}
}

func TestInterruptKillsARunningTool(t *testing.T) {
	m := &model{replies: []llm.Message{call("c1", "bash", `{"command":"sleep 30"}`), text("never")}}
	l, _ := newLoop(t, m)
	ctx, cancel := context.WithCancel(context.Background())
	l.Emit = func(e Event) {
		if e.Kind == ToolCallStart {
			cancel()
		}
	}
	outcome, err := l.Run(ctx, user("go"))
	if err != nil || outcome != OutcomeInterrupted {
		t.Fatalf("run: %q %v", outcome, err)
	}
}

func TestSteeringReachesTheNextModelCall(t *testing.T) {
	m := &model{replies: []llm.Message{call("c1", "ls", `{}`), text("ok")}}
	l, _ := newLoop(t, m)
	var once sync.Once
	l.Steering = func() []llm.Message {
		var out []llm.Message
		if len(m.requests) == 1 {
			once.Do(func() { out = user("also check the tests") })
		}
		return out
	}
	if _, err := l.Run(context.Background(), user("go")); err != nil {
		t.Fatal(err)
	}
	last := m.requests[1].Messages[len(m.requests[1].Messages)-1]
	if last.Role != llm.RoleUser || last.Text() != "also check the tests" {
		t.Fatalf("second call ends with %+v", last)
	}
}

func TestRepairAnswersInterruptedToolCalls(t *testing.T) {
	two := llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
		{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "a", Name: "ls"}},
		{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "b", Name: "ls"}},
	}}
	partial := llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "a"}}}}
	got := Repair([]llm.Message{user("x")[0], two, partial, user("y")[0], call("c", "ls", `{}`)})
	if len(got) != 6 || len(got[2].Parts) != 2 || got[5].Role != llm.RoleTool || !got[5].Parts[0].ToolResult.IsError {
		t.Fatalf("repaired %+v", got)
	}
	if len(partial.Parts) != 1 {
		t.Fatal("Repair changed its input")
	}
}

func TestProviderFailureFailsTheRun(t *testing.T) {
	m := &model{}
	l, _ := newLoop(t, m)
	if _, err := l.Run(context.Background(), user("go")); err == nil || !strings.Contains(err.Error(), "exhausted") {
		t.Fatalf("run: %v", err)
	}
}

// panicky is a tool that panics whenever it runs.
type panicky struct{}

func (panicky) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "panicky", Description: "panics", Parameters: json.RawMessage(`{"type":"object"}`)}
}
func (panicky) ReadOnly() bool { return true }
func (panicky) Run(context.Context, *tools.Env, json.RawMessage) tools.Result {
	var m map[string]int
	m["boom"]++ // a nil map: the kind of bug that panics
	return tools.Result{}
}

func TestAPanickingToolGivesTheModelAnErrorResultAndTheTurnGoesOn(t *testing.T) {
	m := &model{replies: []llm.Message{
		call("c1", "panicky", `{}`),
		call("c2", "ls", `{}`),
		text("carried on"),
	}}
	l, events := newLoop(t, m)
	l.Tools = append(l.Tools, panicky{})
	var logged bytes.Buffer
	l.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	outcome, err := l.Run(context.Background(), user("go"))
	if err != nil || outcome != OutcomeCompleted {
		t.Fatalf("run: %q %v", outcome, err)
	}
	res := toolResults(m.requests[1])
	if len(res) != 1 || !res[0].IsError || res[0].CallID != "c1" ||
		!strings.Contains(res[0].Content, "panicky: failed unexpectedly") || !strings.Contains(res[0].Content, "nil map") {
		t.Fatalf("result of the panicking call: %+v", res)
	}
	if res := toolResults(m.requests[2]); len(res) != 1 || res[0].IsError {
		t.Fatalf("the next tool call after the panic: %+v", res)
	}
	if !strings.Contains(logged.String(), "tool panicked") || !strings.Contains(logged.String(), "panicky.Run") {
		t.Errorf("log lacks the panic and its stack: %s", logged.String())
	}
	var ended bool
	for _, e := range *events {
		if e.Kind == ToolCallEnd && e.ToolCall.ID == "c1" && e.IsError {
			ended = true
		}
	}
	if !ended {
		t.Error("no tool_call_end event reports the panicking call as failed")
	}
}

func TestTwoToolsOfOneNameFailTheRun(t *testing.T) {
	m := &model{replies: []llm.Message{text("never")}}
	l, _ := newLoop(t, m)
	l.Tools = append(l.Tools, tools.Builtin()[0])
	if _, err := l.Run(context.Background(), user("go")); err == nil || !strings.Contains(err.Error(), `"bash"`) {
		t.Fatalf("run: %v", err)
	}
	if len(m.requests) != 0 {
		t.Errorf("the model was called %d times", len(m.requests))
	}
}

// retrying is a provider that says it retries once before it answers.
type retrying struct{ model }

func (r *retrying) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Reply, error) {
	emit(llm.Event{Kind: llm.EventRetry, Retry: &llm.Retry{Attempt: 1, MaxAttempts: 6, Delay: 2 * time.Second, Reason: "test: overloaded (HTTP 529)"}})
	return r.model.Stream(ctx, req, emit)
}

func TestARetryOfAModelCallIsReportedInItsMessage(t *testing.T) {
	r := &retrying{model: model{replies: []llm.Message{text("done")}}}
	var events []Event
	l := &Loop{Provider: r, Model: "m", Env: &tools.Env{Cwd: t.TempDir(), Todo: &tools.Todo{}}, Emit: func(e Event) { events = append(events, e) }}
	if out, err := l.Run(context.Background(), user("go")); err != nil || out != OutcomeCompleted {
		t.Fatalf("run: %v %v", out, err)
	}
	var kinds []string
	for _, e := range events {
		kinds = append(kinds, e.Kind)
	}
	if strings.Join(kinds, " ") != "message_start retry message_update message_end" {
		t.Fatalf("events %v", kinds)
	}
	if e := events[1]; e.MessageID != events[0].MessageID || e.Retry == nil || e.Retry.Delay != 2*time.Second {
		t.Errorf("retry event %+v", e)
	}
}
