package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/provider"
	"github.com/agentd-dev/agentd/internal/provider/openai"
	"github.com/agentd-dev/agentd/internal/provider/providertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testKey = "sk-test-0123456789abcdef"

func newProvider(t *testing.T, srv *providertest.Server) *openai.Provider {
	t.Helper()
	return openai.New(openai.Config{APIKey: testKey, BaseURL: srv.URL + "/v1", HTTPClient: srv.HTTPClient()})
}

func userText(s string) llm.Message {
	return llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartText, Text: s}}}
}

func discard(llm.Event) error { return nil }

func TestTextReplyStreamsDeltasInOrder(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{File: "text.sse"})
	p := newProvider(t, srv)
	var rec providertest.Recorder
	reply, err := p.Stream(context.Background(), llm.Request{
		Model:    "gpt-5",
		System:   "You are terse.",
		Messages: []llm.Message{userText("say hello")},
	}, rec.Emit)
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.Event{
		{Kind: llm.EventText, Text: "Hello"},
		{Kind: llm.EventText, Text: ", world"},
		{Kind: llm.EventText, Text: "."},
	}
	if got := rec.Events(); !reflect.DeepEqual(got, want) {
		t.Fatalf("events = %+v, want %+v", got, want)
	}
	wantReply := llm.Reply{
		Message:    llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{{Type: llm.PartText, Text: "Hello, world."}}},
		StopReason: llm.StopEnd,
		Usage:      llm.Usage{InputTokens: 21, OutputTokens: 4},
	}
	if !reflect.DeepEqual(reply, wantReply) {
		t.Errorf("reply = %+v, want %+v", reply, wantReply)
	}

	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("server got %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Method != "POST" || r.Path != "/v1/chat/completions" {
		t.Errorf("request = %s %s", r.Method, r.Path)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("authorization = %q", got)
	}
	body := r.JSON(t)
	wantBody := map[string]any{
		"model":          "gpt-5",
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
		"messages": []any{
			map[string]any{"role": "system", "content": "You are terse."},
			map[string]any{"role": "user", "content": "say hello"},
		},
	}
	if !reflect.DeepEqual(body, wantBody) {
		t.Errorf("request body = %s", r.Body)
	}
}

func TestToolCallsAreAccumulatedByIndex(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{File: "tool_calls.sse"})
	p := newProvider(t, srv)
	var rec providertest.Recorder
	reply, err := p.Stream(context.Background(), llm.Request{
		Model:    "gpt-5",
		Messages: []llm.Message{userText("look around")},
		Tools: []llm.ToolSpec{
			{Name: "bash", Description: "Run a shell command.", Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)},
			{Name: "read", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
		},
	}, rec.Emit)
	if err != nil {
		t.Fatal(err)
	}
	bash := &llm.ToolCall{ID: "call_abc", Name: "bash"}
	read := &llm.ToolCall{ID: "call_def", Name: "read"}
	bashCall := llm.ToolCall{ID: "call_abc", Name: "bash", Arguments: json.RawMessage(`{"command":"ls -la"}`)}
	readCall := llm.ToolCall{ID: "call_def", Name: "read", Arguments: json.RawMessage(`{"path":"go.mod"}`)}
	want := []llm.Event{
		{Kind: llm.EventText, Text: "Checking."},
		{Kind: llm.EventToolCallStart, ToolCall: bash},
		{Kind: llm.EventToolCallDelta, Text: `{"comm`, ToolCall: bash},
		{Kind: llm.EventToolCallDelta, Text: `and":"ls`, ToolCall: bash},
		{Kind: llm.EventToolCallStart, ToolCall: read},
		{Kind: llm.EventToolCallDelta, Text: `{"path":`, ToolCall: read},
		{Kind: llm.EventToolCallDelta, Text: ` -la"}`, ToolCall: bash},
		{Kind: llm.EventToolCallDelta, Text: `"go.mod"}`, ToolCall: read},
		{Kind: llm.EventToolCall, ToolCall: &bashCall},
		{Kind: llm.EventToolCall, ToolCall: &readCall},
	}
	if got := rec.Events(); !reflect.DeepEqual(got, want) {
		t.Fatalf("events =\n%+v\nwant\n%+v", got, want)
	}
	if got := reply.Message.ToolCalls(); !reflect.DeepEqual(got, []llm.ToolCall{bashCall, readCall}) {
		t.Errorf("reply calls = %+v", got)
	}
	if reply.Message.Text() != "Checking." || reply.StopReason != llm.StopToolUse || reply.Usage.OutputTokens != 33 {
		t.Errorf("reply = %+v", reply)
	}

	body := srv.Requests()[0].JSON(t)
	wantTools := []any{
		map[string]any{"type": "function", "function": map[string]any{
			"name": "bash", "description": "Run a shell command.",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}, "required": []any{"command"}},
		}},
		map[string]any{"type": "function", "function": map[string]any{
			"name":       "read",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}},
		}},
	}
	if !reflect.DeepEqual(body["tools"], wantTools) {
		got, _ := json.Marshal(body["tools"])
		t.Errorf("tools = %s", got)
	}
}

func TestToolResultsTravelAsToolMessages(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{File: "text.sse"})
	p := newProvider(t, srv)
	msgs := []llm.Message{
		userText("list the files"),
		{Role: llm.RoleAssistant, Parts: []llm.Part{
			{Type: llm.PartThinking, Text: "not sent back"},
			{Type: llm.PartText, Text: "Running ls."},
			{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "call_1", Name: "bash", Arguments: json.RawMessage(`{"command":"ls"}`)}},
			{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "call_2", Name: "bash"}},
		}},
		{Role: llm.RoleTool, Parts: []llm.Part{
			{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "call_1", Name: "bash", Content: "a.txt\nb.txt"}},
			{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "call_2", Name: "bash", Content: "missing command", IsError: true}},
		}},
		userText("and now?"),
	}
	if _, err := p.Stream(context.Background(), llm.Request{Model: "gpt-5", Messages: msgs}, discard); err != nil {
		t.Fatal(err)
	}
	body := srv.Requests()[0].JSON(t)
	want := []any{
		map[string]any{"role": "user", "content": "list the files"},
		map[string]any{"role": "assistant", "content": "Running ls.", "tool_calls": []any{
			map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "bash", "arguments": `{"command":"ls"}`}},
			map[string]any{"id": "call_2", "type": "function", "function": map[string]any{"name": "bash", "arguments": `{}`}},
		}},
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "a.txt\nb.txt"},
		map[string]any{"role": "tool", "tool_call_id": "call_2", "content": "Error: missing command"},
		map[string]any{"role": "user", "content": "and now?"},
	}
	if !reflect.DeepEqual(body["messages"], want) {
		got, _ := json.MarshalIndent(body["messages"], "", "  ")
		t.Errorf("messages =\n%s", got)
	}
}

func TestReasoningEffortOnlyForReasoningModels(t *testing.T) {
	for _, tc := range []struct {
		model, level, want string
	}{
		{"gpt-5", llm.ThinkingHigh, "high"},
		{"o4-mini", llm.ThinkingLow, "low"},
		{"gpt-5-mini", llm.ThinkingMedium, "medium"},
		{"gpt-5", llm.ThinkingOff, ""},
		{"gpt-5", "", ""},
		{"gpt-4.1", llm.ThinkingHigh, ""},
		{"llama3.2", llm.ThinkingHigh, ""},
	} {
		t.Run(tc.model+"/"+tc.level, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.Response{File: "text.sse"})
			p := newProvider(t, srv)
			if _, err := p.Stream(context.Background(), llm.Request{Model: tc.model, Thinking: tc.level, MaxTokens: 500, Messages: []llm.Message{userText("hi")}}, discard); err != nil {
				t.Fatal(err)
			}
			body := srv.Requests()[0].JSON(t)
			got, _ := body["reasoning_effort"].(string)
			if got != tc.want {
				t.Errorf("reasoning_effort = %q, want %q", got, tc.want)
			}
			if body["max_completion_tokens"] != float64(500) {
				t.Errorf("max_completion_tokens = %v", body["max_completion_tokens"])
			}
		})
	}
}

func TestReasoningTextOfCompatibleServersIsThinking(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{File: "reasoning.sse"})
	// A local server: a base URL and no key.
	p := openai.New(openai.Config{BaseURL: srv.URL + "/v1", HTTPClient: srv.HTTPClient()})
	if !p.Configured() {
		t.Fatal("a base URL without a key is not configured")
	}
	var rec providertest.Recorder
	reply, err := p.Stream(context.Background(), llm.Request{Model: "qwen3", Messages: []llm.Message{userText("hi")}}, rec.Emit)
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.Event{
		{Kind: llm.EventThinking, Text: "The user says hi. "},
		{Kind: llm.EventThinking, Text: "Greet back."},
		{Kind: llm.EventText, Text: "Hi!"},
	}
	if got := rec.Events(); !reflect.DeepEqual(got, want) {
		t.Errorf("events = %+v", got)
	}
	wantParts := []llm.Part{{Type: llm.PartThinking, Text: "The user says hi. Greet back."}, {Type: llm.PartText, Text: "Hi!"}}
	if !reflect.DeepEqual(reply.Message.Parts, wantParts) {
		t.Errorf("parts = %+v", reply.Message.Parts)
	}
	if h := srv.Requests()[0].Header.Get("Authorization"); h != "" {
		t.Errorf("authorization sent without a key: %q", h)
	}
}

func tinyPolicy(w *providertest.Waits) provider.RetryPolicy {
	return provider.RetryPolicy{Attempts: 4, BaseDelay: time.Millisecond, MaxDelay: time.Minute, Wait: w.Wait}
}

func TestInvalidKeyFailsAtOnceWithAClearMessage(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{Status: 401, File: "error_401.json"})
	var waits providertest.Waits
	p := provider.WithRetry(newProvider(t, srv), tinyPolicy(&waits))
	_, err := p.Stream(context.Background(), llm.Request{Model: "gpt-5", Messages: []llm.Message{userText("hi")}}, discard)
	if err == nil || err.Error() != "openai: invalid API key for openai (HTTP 401)" {
		t.Fatalf("error = %v", err)
	}
	if n := len(srv.Requests()); n != 1 || len(waits.All()) != 0 {
		t.Errorf("requests = %d, waits = %v; a 401 is never retried", n, waits.All())
	}
}

func TestRateLimitIsRetriedAfterTheWaitTheServiceAsks(t *testing.T) {
	srv := providertest.NewServer(t,
		providertest.Response{Status: 429, File: "error_429.json", Header: map[string]string{"Retry-After": "2"}},
		providertest.Response{Status: 429, File: "error_429.json", Header: map[string]string{"Retry-After-Ms": "1500"}},
		providertest.Response{File: "text.sse"},
	)
	var waits providertest.Waits
	p := provider.WithRetry(newProvider(t, srv), tinyPolicy(&waits))
	reply, err := p.Stream(context.Background(), llm.Request{Model: "gpt-5", Messages: []llm.Message{userText("hi")}}, discard)
	if err != nil {
		t.Fatal(err)
	}
	if reply.Message.Text() != "Hello, world." {
		t.Errorf("reply = %+v", reply)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("server got %d requests, want 3", n)
	}
	if got := waits.All(); !reflect.DeepEqual(got, []time.Duration{2 * time.Second, 1500 * time.Millisecond}) {
		t.Errorf("waits = %v", got)
	}
}

func TestServerFailuresAreRetriedUntilTheAttemptsRunOut(t *testing.T) {
	for _, tc := range []struct {
		status int
		file   string
		want   string
	}{
		{500, "error_500.json", "openai: internal server error (HTTP 500) after 4 attempts"},
		{503, "error_503.json", "openai: service unavailable (HTTP 503) after 4 attempts"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			var responses []providertest.Response
			for range 4 {
				responses = append(responses, providertest.Response{Status: tc.status, File: tc.file})
			}
			srv := providertest.NewServer(t, responses...)
			var waits providertest.Waits
			p := provider.WithRetry(newProvider(t, srv), tinyPolicy(&waits))
			_, err := p.Stream(context.Background(), llm.Request{Model: "gpt-5", Messages: []llm.Message{userText("hi")}}, discard)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
			var pe *llm.ProviderError
			if !errors.As(err, &pe) || pe.Status != tc.status {
				t.Errorf("provider error = %+v", pe)
			}
			if n := len(srv.Requests()); n != 4 || len(waits.All()) != 3 {
				t.Errorf("requests = %d, waits = %v; want 4 and 3", n, waits.All())
			}
		})
	}
}

func TestAnErrorInsideTheStreamAfterTextIsNotRetried(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{File: "midstream_error.sse"})
	var waits providertest.Waits
	p := provider.WithRetry(newProvider(t, srv), tinyPolicy(&waits))
	var rec providertest.Recorder
	reply, err := p.Stream(context.Background(), llm.Request{Model: "gpt-5", Messages: []llm.Message{userText("hi")}}, rec.Emit)
	want := "openai: stream failed: The server had an error while processing your request."
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
	if len(srv.Requests()) != 1 || len(rec.Events()) != 1 || reply.Message.Text() != "Partial" {
		t.Errorf("requests = %d, events = %+v, reply = %+v", len(srv.Requests()), rec.Events(), reply)
	}
}

func TestAMissingModelCarriesTheServiceMessage(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{Status: 404, File: "error_404.json"})
	p := newProvider(t, srv)
	_, err := p.Stream(context.Background(), llm.Request{Model: "gpt-nope", Messages: []llm.Message{userText("hi")}}, discard)
	want := "openai: not found: The model `gpt-nope` does not exist or you do not have access to it. (HTTP 404)"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}

func TestAConnectionCutBeforeAnAnswerIsRetried(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{HangUp: true}, providertest.Response{File: "text.sse"})
	var waits providertest.Waits
	p := provider.WithRetry(newProvider(t, srv), tinyPolicy(&waits))
	reply, err := p.Stream(context.Background(), llm.Request{Model: "gpt-5", Messages: []llm.Message{userText("hi")}}, discard)
	if err != nil || reply.Message.Text() != "Hello, world." {
		t.Fatalf("reply = %+v, %v", reply, err)
	}
	if len(srv.Requests()) != 2 {
		t.Errorf("requests = %d, want 2", len(srv.Requests()))
	}
}

func TestWithNeitherKeyNorURLItIsNotConfigured(t *testing.T) {
	p := openai.New(openai.Config{})
	if p.Configured() || p.ConfigEnv() != "OPENAI_API_KEY" {
		t.Errorf("configured = %v, env = %q", p.Configured(), p.ConfigEnv())
	}
	_, err := p.Stream(context.Background(), llm.Request{Model: "gpt-5"}, discard)
	if err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Errorf("error = %v", err)
	}
}
