package anthropic_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/provider/providertest"
)

func toolCall(id string) llm.Part {
	return llm.Part{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: id, Name: "bash", Arguments: json.RawMessage(`{"command":"ls"}`)}}
}

func toolResult(id string) llm.Message {
	return llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: id, Name: "bash", Content: "a.go"}}}}
}

// cachedAt lists where a request body sets cache_control, as paths:
// "tools[1]", "system[0]", "messages[3].content[1]".
func cachedAt(t *testing.T, body map[string]any) []string {
	t.Helper()
	var at []string
	marked := func(v any) bool {
		m, _ := v.(map[string]any)
		cc, ok := m["cache_control"].(map[string]any)
		if ok && cc["type"] != "ephemeral" {
			t.Errorf("cache_control %v, want type ephemeral", cc)
		}
		return ok
	}
	for _, key := range []string{"tools", "system"} {
		list, _ := body[key].([]any)
		for i, v := range list {
			if marked(v) {
				at = append(at, key+"["+itoa(i)+"]")
			}
		}
	}
	msgs, _ := body["messages"].([]any)
	for i, m := range msgs {
		content, _ := m.(map[string]any)["content"].([]any)
		for j, b := range content {
			if marked(b) {
				at = append(at, "messages["+itoa(i)+"].content["+itoa(j)+"]")
			}
		}
	}
	return at
}

func itoa(i int) string { return strconv.Itoa(i) }

// Anthropic's prompt caching, as it documents it: breakpoints on the last
// tool, the system prompt, the conversation's last block (moving with each
// call) and the end of the previous turn (standing for the whole turn),
// never more than four, never on a thinking block.
func TestRequestsCarryPromptCachingBreakpoints(t *testing.T) {
	tools := []llm.ToolSpec{
		{Name: "read", Description: "Read a file.", Parameters: json.RawMessage(`{"type":"object"}`)},
		{Name: "bash", Description: "Run a command.", Parameters: json.RawMessage(`{"type":"object"}`)},
	}
	thinking := llm.Part{Type: llm.PartThinking, Text: "hmm", Signature: "sig"}
	cases := []struct {
		name     string
		messages []llm.Message
		want     []string
	}{
		{"the first call of the first turn", []llm.Message{userText("first")},
			[]string{"tools[1]", "system[0]", "messages[0].content[0]"}},
		{"a later call of the first turn", []llm.Message{
			userText("first"),
			{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartText, Text: "looking"}, toolCall("c1")}},
			toolResult("c1"),
		}, []string{"tools[1]", "system[0]", "messages[2].content[0]"}},
		{"a call of the second turn", []llm.Message{
			userText("first"),
			{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartText, Text: "looking"}, toolCall("c1")}},
			toolResult("c1"),
			{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartText, Text: "done"}}},
			userText("second"),
			{Role: llm.RoleAssistant, Parts: []llm.Part{thinking, toolCall("c2"), thinking}},
			toolResult("c2"),
		}, []string{"tools[1]", "system[0]", "messages[3].content[0]", "messages[6].content[0]"}},
		{"a thinking block is passed over", []llm.Message{
			userText("first"),
			{Role: llm.RoleAssistant, Parts: []llm.Part{toolCall("c1"), thinking}},
			userText("second"),
		}, []string{"tools[1]", "system[0]", "messages[1].content[0]", "messages[2].content[0]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.Response{File: "usage_cache.sse"})
			reply, err := newProvider(t, srv).Stream(context.Background(), llm.Request{
				Model: "claude-sonnet-4-5", System: "You are terse.", Tools: tools, Messages: tc.messages,
			}, (&providertest.Recorder{}).Emit)
			if err != nil {
				t.Fatal(err)
			}
			got := cachedAt(t, srv.Requests()[0].JSON(t))
			if strings.Join(got, " ") != strings.Join(tc.want, " ") || len(got) > 4 {
				t.Errorf("breakpoints at %v, want %v", got, tc.want)
			}
			if reply.Usage.CacheReadTokens != 8000 || reply.Usage.CacheWriteTokens != 2000 {
				t.Errorf("usage %+v: the cache's reads and writes are not reported", reply.Usage)
			}
		})
	}
}
