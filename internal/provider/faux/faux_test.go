package faux_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/provider/faux"
	"github.com/agentd-dev/agentd/internal/provider/providertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var bashSpec = llm.ToolSpec{Name: "bash", Description: "Run a shell command.", Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}}}`)}

func userText(s string) llm.Message {
	return llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartText, Text: s}}}
}

func newFaux(t *testing.T) *faux.Provider {
	t.Helper()
	p, err := faux.New(faux.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// textOf joins the text deltas of events.
func textOf(events []llm.Event, kind string) string {
	var sb strings.Builder
	for _, ev := range events {
		if ev.Kind == kind {
			sb.WriteString(ev.Text)
		}
	}
	return sb.String()
}

// runBash runs a command as the bash tool would, for the loop below.
func runBash(t *testing.T, call llm.ToolCall) llm.ToolResult {
	t.Helper()
	var args struct{ Command string }
	if err := json.Unmarshal(call.Arguments, &args); err != nil {
		t.Fatalf("bash arguments %s: %v", call.Arguments, err)
	}
	out, err := exec.Command("sh", "-c", args.Command).CombinedOutput()
	return llm.ToolResult{CallID: call.ID, Name: call.Name, Content: string(out), IsError: err != nil}
}

func TestBacktickCommandsRunInOrderThenASummaryQuotesTheirOutput(t *testing.T) {
	p := newFaux(t)
	msgs := []llm.Message{userText("check two things: run `echo first` and then `printf 'a\\nb\\n'`, please")}
	var ran []string
	for call := 1; ; call++ {
		if call > 5 {
			t.Fatal("the model never stopped calling tools")
		}
		var rec providertest.Recorder
		reply, err := p.Stream(context.Background(), llm.Request{Model: "echo", Messages: msgs, Tools: []llm.ToolSpec{bashSpec}}, rec.Emit)
		if err != nil {
			t.Fatal(err)
		}
		calls := reply.Message.ToolCalls()
		if reply.StopReason == llm.StopEnd {
			if len(calls) != 0 {
				t.Fatalf("a final reply with tool calls: %+v", calls)
			}
			text := reply.Message.Text()
			if textOf(rec.Events(), llm.EventText) != text {
				t.Errorf("the deltas do not add up to the reply")
			}
			want := "I ran 2 commands.\n\n`echo first` printed:\n```\nfirst\n```\n\n`printf 'a\\nb\\n'` printed:\n```\na\nb\n```"
			if text != want {
				t.Errorf("summary =\n%s\nwant\n%s", text, want)
			}
			break
		}
		if reply.StopReason != llm.StopToolUse || len(calls) != 1 {
			t.Fatalf("call %d: stop %q with %d tool calls, want one call per reply", call, reply.StopReason, len(calls))
		}
		c := calls[0]
		ev := rec.Events()
		n := len(ev)
		if n < 3 || ev[n-3].Kind != llm.EventToolCallStart || ev[n-2].Kind != llm.EventToolCallDelta || ev[n-1].Kind != llm.EventToolCall {
			t.Fatalf("events end %+v, want tool call start, delta, call", ev)
		}
		if ev[n-3].ToolCall.ID != c.ID || ev[n-2].Text != string(c.Arguments) || !reflect.DeepEqual(*ev[n-1].ToolCall, c) {
			t.Errorf("tool call events disagree with the reply: %+v vs %+v", ev[n-3:], c)
		}
		var args map[string]string
		if err := json.Unmarshal(c.Arguments, &args); err != nil || c.Name != "bash" || len(args) != 1 {
			t.Fatalf("tool call = %s %s", c.Name, c.Arguments)
		}
		ran = append(ran, args["command"])
		msgs = append(msgs, reply.Message, llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Type: llm.PartToolResult, ToolResult: ptr(runBash(t, c))}}})
	}
	if want := []string{"echo first", `printf 'a\nb\n'`}; !reflect.DeepEqual(ran, want) {
		t.Errorf("commands run = %q, want %q", ran, want)
	}
}

func ptr[T any](v T) *T { return &v }

func TestASummaryBoundsLongOutputAndSaysWhatFailed(t *testing.T) {
	p := newFaux(t)
	var long []string
	for i := 1; i <= 30; i++ {
		long = append(long, fmt.Sprintf("line %d", i))
	}
	msgs := []llm.Message{
		userText("run `seq 30` and `false` and `true`"),
		{Role: llm.RoleTool, Parts: []llm.Part{
			{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "1", Name: "bash", Content: strings.Join(long, "\n") + "\n"}},
			{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "2", Name: "bash", Content: "exit status 1", IsError: true}},
			{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "3", Name: "bash", Content: ""}},
		}},
	}
	reply, err := p.Stream(context.Background(), llm.Request{Messages: msgs, Tools: []llm.ToolSpec{bashSpec}}, func(llm.Event) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	text := reply.Message.Text()
	for _, want := range []string{"I ran 3 commands.", "line 20\n… (10 more lines)", "`false` failed with:\n```\nexit status 1\n```", "`true` printed nothing."} {
		if !strings.Contains(text, want) {
			t.Errorf("summary lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "line 21") {
		t.Errorf("summary quotes past 20 lines:\n%s", text)
	}
	// A call refused before it ran is named; its refusal, shown as the
	// call's result, is not quoted again.
	refusal := "bash was not run: the session's approval policy is read-only, which refuses bash"
	msgs = []llm.Message{
		userText("run `ls -la`"),
		{Role: llm.RoleTool, Parts: []llm.Part{{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "1", Name: "bash", Content: refusal, IsError: true}}}},
	}
	reply, err = p.Stream(context.Background(), llm.Request{Messages: msgs, Tools: []llm.ToolSpec{bashSpec}}, func(llm.Event) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if text := reply.Message.Text(); strings.Contains(text, "approval policy") || !strings.Contains(text, "`ls -la` was not run") || !strings.Contains(text, "I ran 0 commands.") {
		t.Errorf("summary of a refused call:\n%s", text)
	}
}

func TestCommandsInTheirQuotes(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"run `ls -la`", []string{"ls -la"}},
		{"`a` then `b` then `c`", []string{"a", "b", "c"}},
		{"first:\n```sh\nmake test\n```\nthen `git status`", []string{"make test", "git status"}},
		{"```\necho one\necho two\n```", []string{"echo one\necho two"}},
		{"inline fence ```pwd``` works", []string{"pwd"}},
		{"```go test ./...\n```", []string{"go test ./..."}},
		{"an unclosed `quote", nil},
		{"a quote does not cross `lines\nlike` this", nil},
		{"empty `` and `  ` count for nothing", nil},
		{"no commands at all", nil},
	} {
		if got := faux.Commands(tc.text); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Commands(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

func TestWithoutABashToolItSaysSo(t *testing.T) {
	p := newFaux(t)
	reply, err := p.Stream(context.Background(), llm.Request{Messages: []llm.Message{userText("run `ls`")}}, func(llm.Event) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if reply.StopReason != llm.StopEnd || !strings.Contains(reply.Message.Text(), "no bash tool") {
		t.Errorf("reply = %+v", reply)
	}
}

func TestAnyOtherPromptGetsTheSameStreamedReplyEveryTime(t *testing.T) {
	p := newFaux(t)
	req := llm.Request{Messages: []llm.Message{userText("what is the weather like?")}, Tools: []llm.ToolSpec{bashSpec}}
	var first, second providertest.Recorder
	r1, err := p.Stream(context.Background(), req, first.Emit)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := p.Stream(context.Background(), req, second.Emit)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first.Events(), second.Events()) || !reflect.DeepEqual(r1, r2) {
		t.Error("two calls with one request answered differently")
	}
	ev := first.Events()
	if len(ev) < 10 {
		t.Errorf("the reply came in %d deltas, want it streamed in word chunks", len(ev))
	}
	for _, e := range ev {
		if e.Kind != llm.EventText {
			t.Errorf("event %+v, want text only", e)
		}
	}
	text := r1.Message.Text()
	if textOf(ev, llm.EventText) != text || !strings.Contains(text, `"what is the weather like?"`) {
		t.Errorf("reply = %q", text)
	}
	if r1.StopReason != llm.StopEnd || r1.Usage.OutputTokens != len(ev) {
		t.Errorf("stop = %q, usage = %+v", r1.StopReason, r1.Usage)
	}

	other, err := p.Stream(context.Background(), llm.Request{Messages: []llm.Message{userText("something else")}}, func(llm.Event) error { return nil })
	if err != nil || other.Message.Text() == text {
		t.Errorf("another prompt got the same reply: %v", err)
	}
}

func TestAThinkingLevelAddsAThinkingPartFirst(t *testing.T) {
	p := newFaux(t)
	var rec providertest.Recorder
	reply, err := p.Stream(context.Background(), llm.Request{Messages: []llm.Message{userText("hello")}, Thinking: llm.ThinkingMedium}, rec.Emit)
	if err != nil {
		t.Fatal(err)
	}
	ev := rec.Events()
	if ev[0].Kind != llm.EventThinking {
		t.Errorf("first event = %+v, want thinking", ev[0])
	}
	parts := reply.Message.Parts
	if len(parts) != 2 || parts[0].Type != llm.PartThinking || parts[1].Type != llm.PartText || parts[0].Text != textOf(ev, llm.EventThinking) {
		t.Errorf("parts = %+v", parts)
	}
}

func TestAnEmitErrorStopsTheReply(t *testing.T) {
	p := newFaux(t)
	stop := fmt.Errorf("gone")
	n := 0
	_, err := p.Stream(context.Background(), llm.Request{Messages: []llm.Message{userText("a long enough prompt")}}, func(llm.Event) error { n++; return stop })
	if err != stop || n != 1 {
		t.Errorf("err = %v after %d emits", err, n)
	}
}
