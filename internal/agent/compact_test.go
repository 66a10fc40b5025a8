package agent

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/internal/llm"
)

func msg(role, s string) llm.Message {
	return llm.Message{Role: role, Parts: []llm.Part{{Type: llm.PartText, Text: s}}}
}

func toolCall(id string) llm.Message {
	return llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: id, Name: "bash", Arguments: []byte(`{"command":"ls"}`)}}}}
}

func toolResult(id, out string) llm.Message {
	return llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: id, Name: "bash", Content: out}}}}
}

func TestTheCutNeverKeepsAToolResultWithoutItsCallNorSummarizesTheRequestBeingAnswered(t *testing.T) {
	h := []llm.Message{msg(llm.RoleUser, "a"), toolCall("c1"), toolResult("c1", "x"), msg(llm.RoleAssistant, "done"), msg(llm.RoleUser, strings.Repeat("big ", 100))}
	cases := []struct {
		keep, budget, want int
	}{
		{keep: 2, want: 3},     // keeps the reply and the request
		{keep: 3, want: 3},     // a result without its call: the cut moves past it
		{keep: 4, want: 1},     // the call and its result
		{budget: 0, want: 4},   // nothing fits: the request being answered stays
		{budget: 420, want: 3}, // the request and the reply before it fit
	}
	for _, c := range cases {
		got, err := CutPoint(h, c.keep, c.budget)
		if err != nil || got != c.want {
			t.Errorf("keep %d, budget %d: cut %d, %v; want %d", c.keep, c.budget, got, err, c.want)
		}
	}
	summarized := Compacted(h, 3, "s")
	if _, err := CutPoint(summarized, 0, 1<<20); !errors.Is(err, ErrNothingToCompact) {
		t.Errorf("a summary and what it kept, all fitting: %v, want ErrNothingToCompact", err)
	}
	if _, err := CutPoint(summarized, len(summarized)-1, 0); !errors.Is(err, ErrNothingToCompact) {
		t.Errorf("only the summary to summarize again: %v", err)
	}
}

func TestASummaryRequestCutsToolOutputAndFitsItsWindow(t *testing.T) {
	long := strings.Repeat("line of output\n", 2000)
	h := []llm.Message{Compacted(nil, 0, "before")[0], msg(llm.RoleUser, "first"), toolCall("c1"), toolResult("c1", long)}
	req := SummaryRequest("m", h, 100_000)
	got := req.Messages[0].Text()
	if req.System != llm.SummarySystem || len(req.Tools) != 0 {
		t.Fatalf("request: system %q, %d tools", req.System, len(req.Tools))
	}
	if !strings.Contains(got, "summary of what came before: before") || !strings.Contains(got, "user: first") || !strings.Contains(got, "bytes cut") || len(got) > 2000 {
		t.Fatalf("written out (%d bytes):\n%s", len(got), got)
	}
	var many []llm.Message
	for range 500 {
		many = append(many, msg(llm.RoleUser, strings.Repeat("word ", 50)))
	}
	small := SummaryRequest("m", many, 4096).Messages[0].Text()
	if len(small) > 4096*60/100*BytesPerToken+200 || !strings.Contains(small, "lines of the conversation left out") {
		t.Fatalf("a conversation past the window is written out in %d bytes", len(small))
	}
}
