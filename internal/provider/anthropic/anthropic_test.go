package anthropic_test

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
	"github.com/agentd-dev/agentd/internal/provider/anthropic"
	"github.com/agentd-dev/agentd/internal/provider/providertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testKey = "sk-ant-test-0123456789abcdef"

func newProvider(t *testing.T, srv *providertest.Server) *anthropic.Provider {
	t.Helper()
	return anthropic.New(anthropic.Config{APIKey: testKey, BaseURL: srv.URL, HTTPClient: srv.HTTPClient()})
}

func userText(s string) llm.Message {
	return llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartText, Text: s}}}
}

// jsonOf re-encodes v so that it compares with decoded JSON.
func jsonOf(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTextReplyStreamsDeltasInOrder(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{File: "text.sse"})
	p := newProvider(t, srv)
	var rec providertest.Recorder
	reply, err := p.Stream(context.Background(), llm.Request{
		Model:    "claude-sonnet-4-5",
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
	if reply.Message.Role != llm.RoleAssistant || reply.Message.Text() != "Hello, world." {
		t.Errorf("reply message = %+v", reply.Message)
	}
	if reply.StopReason != llm.StopEnd {
		t.Errorf("stop reason = %q, want %q", reply.StopReason, llm.StopEnd)
	}
	// 25×3 + 15×15 dollars per million tokens.
	if reply.Usage != (llm.Usage{InputTokens: 25, OutputTokens: 15, Cost: 0.0003, Priced: true}) {
		t.Errorf("usage = %+v", reply.Usage)
	}

	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("server got %d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Method != "POST" || r.Path != "/v1/messages" {
		t.Errorf("request = %s %s, want POST /v1/messages", r.Method, r.Path)
	}
	// The key is sent in x-api-key, as Anthropic documents, and nowhere
	// else.
	if got := r.Header.Get("X-Api-Key"); got != testKey {
		t.Errorf("x-api-key = %q", got)
	}
	if got := r.Header.Get("Authorization"); got != "" {
		t.Errorf("authorization = %q, want none", got)
	}
	if r.Header.Get("Anthropic-Version") == "" {
		t.Error("no anthropic-version header")
	}
	body := withoutCacheControl(r.JSON(t))
	wantBody := map[string]any{
		"model":      "claude-sonnet-4-5",
		"max_tokens": float64(anthropic.DefaultMaxTokens),
		"stream":     true,
		"system":     []any{map[string]any{"type": "text", "text": "You are terse."}},
		"messages": []any{map[string]any{
			"role":    "user",
			"content": []any{map[string]any{"type": "text", "text": "say hello"}},
		}},
	}
	if !reflect.DeepEqual(body, wantBody) {
		t.Errorf("request body =\n%s\nwant\n%s", r.Body, jsonOf(t, wantBody))
	}
}

func TestToolCallArgumentsAreAssembledFromSeveralDeltas(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{File: "tool_use.sse"})
	p := newProvider(t, srv)
	var rec providertest.Recorder
	reply, err := p.Stream(context.Background(), llm.Request{
		Model:    "claude-sonnet-4-5",
		Messages: []llm.Message{userText("list the files")},
		Tools: []llm.ToolSpec{{
			Name:        "bash",
			Description: "Run a shell command.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"],"additionalProperties":false}`),
		}},
	}, rec.Emit)
	if err != nil {
		t.Fatal(err)
	}
	start := &llm.ToolCall{ID: "toolu_01A", Name: "bash"}
	want := []llm.Event{
		{Kind: llm.EventText, Text: "Let me list the files."},
		{Kind: llm.EventToolCallStart, ToolCall: start},
		{Kind: llm.EventToolCallDelta, Text: `{"comm`, ToolCall: start},
		{Kind: llm.EventToolCallDelta, Text: `and": "ls`, ToolCall: start},
		{Kind: llm.EventToolCallDelta, Text: ` -la"}`, ToolCall: start},
		{Kind: llm.EventToolCall, ToolCall: &llm.ToolCall{ID: "toolu_01A", Name: "bash", Arguments: json.RawMessage(`{"command": "ls -la"}`)}},
	}
	if got := rec.Events(); !reflect.DeepEqual(got, want) {
		t.Fatalf("events =\n%+v\nwant\n%+v", got, want)
	}
	calls := reply.Message.ToolCalls()
	if len(calls) != 1 || calls[0].ID != "toolu_01A" || calls[0].Name != "bash" || string(calls[0].Arguments) != `{"command": "ls -la"}` {
		t.Errorf("reply tool calls = %+v", calls)
	}
	if reply.Message.Text() != "Let me list the files." || reply.Message.Parts[0].Type != llm.PartText {
		t.Errorf("reply parts = %+v", reply.Message.Parts)
	}
	if reply.StopReason != llm.StopToolUse {
		t.Errorf("stop reason = %q", reply.StopReason)
	}

	body := withoutCacheControl(srv.Requests()[0].JSON(t))
	wantTools := []any{map[string]any{
		"name":        "bash",
		"description": "Run a shell command.",
		"input_schema": map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"command": map[string]any{"type": "string"}},
			"required":             []any{"command"},
			"additionalProperties": false,
		},
	}}
	if !reflect.DeepEqual(body["tools"], wantTools) {
		t.Errorf("tools = %v, want %v", body["tools"], wantTools)
	}
}

func TestToolResultsTravelAsToolResultBlocksOfAUserMessage(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{File: "text.sse"})
	p := newProvider(t, srv)
	msgs := []llm.Message{
		userText("list the files"),
		{Role: llm.RoleAssistant, Parts: []llm.Part{
			{Type: llm.PartThinking, Text: "I should run ls.", Signature: "sig-1"},
			{Type: llm.PartThinking, Text: "unsigned thinking is not sent back"},
			{Type: llm.PartThinking, Signature: anthropic.RedactedPrefix + "opaque-data"},
			{Type: llm.PartText, Text: "Running ls."},
			{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "toolu_1", Name: "bash", Arguments: json.RawMessage(`{"command":"ls"}`)}},
			{Type: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "toolu_2", Name: "bash", Arguments: json.RawMessage(`not json`)}},
		}},
		{Role: llm.RoleTool, Parts: []llm.Part{
			{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "toolu_1", Name: "bash", Content: "a.txt\nb.txt"}},
			{Type: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "toolu_2", Name: "bash", Content: "arguments are not JSON", IsError: true}},
		}},
		userText("and now?"),
	}
	if _, err := p.Stream(context.Background(), llm.Request{Model: "claude-sonnet-4-5", Messages: msgs}, func(llm.Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
	body := withoutCacheControl(srv.Requests()[0].JSON(t))
	want := []any{
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "list the files"}}},
		map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "thinking", "thinking": "I should run ls.", "signature": "sig-1"},
			map[string]any{"type": "redacted_thinking", "data": "opaque-data"},
			map[string]any{"type": "text", "text": "Running ls."},
			map[string]any{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": map[string]any{"command": "ls"}},
			map[string]any{"type": "tool_use", "id": "toolu_2", "name": "bash", "input": map[string]any{}},
		}},
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": []any{map[string]any{"type": "text", "text": "a.txt\nb.txt"}}},
			map[string]any{"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true, "content": []any{map[string]any{"type": "text", "text": "arguments are not JSON"}}},
			map[string]any{"type": "text", "text": "and now?"},
		}},
	}
	if !reflect.DeepEqual(body["messages"], want) {
		got, _ := json.MarshalIndent(body["messages"], "", "  ")
		t.Errorf("messages =\n%s", got)
	}
}

func TestThinkingReplyKeepsItsSignature(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{File: "thinking.sse"})
	p := newProvider(t, srv)
	var rec providertest.Recorder
	reply, err := p.Stream(context.Background(), llm.Request{
		Model:    "claude-sonnet-4-5",
		Messages: []llm.Message{userText("greet me")},
		Thinking: llm.ThinkingHigh,
	}, rec.Emit)
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.Event{
		{Kind: llm.EventThinking, Text: "The user wants a greeting. "},
		{Kind: llm.EventThinking, Text: "A short one will do."},
		{Kind: llm.EventText, Text: "Hi there!"},
	}
	if got := rec.Events(); !reflect.DeepEqual(got, want) {
		t.Fatalf("events = %+v, want %+v", got, want)
	}
	wantParts := []llm.Part{
		{Type: llm.PartThinking, Text: "The user wants a greeting. A short one will do.", Signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"},
		{Type: llm.PartText, Text: "Hi there!"},
	}
	if !reflect.DeepEqual(reply.Message.Parts, wantParts) {
		t.Errorf("parts = %+v, want %+v", reply.Message.Parts, wantParts)
	}
	body := withoutCacheControl(srv.Requests()[0].JSON(t))
	wantThinking := map[string]any{"type": "enabled", "budget_tokens": float64(24576)}
	if !reflect.DeepEqual(body["thinking"], wantThinking) {
		t.Errorf("thinking = %v, want %v", body["thinking"], wantThinking)
	}
	if mt := body["max_tokens"].(float64); mt <= 24576 {
		t.Errorf("max_tokens = %v, not above the budget", mt)
	}
}

func TestThinkingLevelsSetBudgetsBelowMaxTokens(t *testing.T) {
	for _, tc := range []struct {
		level     string
		maxTokens int
		budget    float64 // 0: no thinking field
		wantMax   float64
	}{
		{level: "", budget: 0, wantMax: anthropic.DefaultMaxTokens},
		{level: llm.ThinkingOff, budget: 0, wantMax: anthropic.DefaultMaxTokens},
		{level: llm.ThinkingLow, budget: 2048, wantMax: anthropic.DefaultMaxTokens},
		{level: llm.ThinkingMedium, budget: 8192, wantMax: 8192 + anthropic.DefaultMaxTokens},
		{level: llm.ThinkingMedium, maxTokens: 1000, budget: 8192, wantMax: 8192 + anthropic.DefaultMaxTokens},
		{level: llm.ThinkingHigh, maxTokens: 64000, budget: 24576, wantMax: 64000},
	} {
		t.Run(tc.level, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.Response{File: "text.sse"})
			p := newProvider(t, srv)
			_, err := p.Stream(context.Background(), llm.Request{
				Model: "claude-sonnet-4-5", Messages: []llm.Message{userText("hi")},
				Thinking: tc.level, MaxTokens: tc.maxTokens,
			}, func(llm.Event) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			body := withoutCacheControl(srv.Requests()[0].JSON(t))
			if body["max_tokens"] != tc.wantMax {
				t.Errorf("max_tokens = %v, want %v", body["max_tokens"], tc.wantMax)
			}
			th, ok := body["thinking"].(map[string]any)
			if tc.budget == 0 {
				if ok {
					t.Errorf("thinking = %v, want none", th)
				}
				return
			}
			if !ok || th["type"] != "enabled" || th["budget_tokens"] != tc.budget {
				t.Errorf("thinking = %v, want budget %v", body["thinking"], tc.budget)
			}
		})
	}
}

func tinyPolicy(w *providertest.Waits) provider.RetryPolicy {
	return provider.RetryPolicy{Attempts: 4, BaseDelay: time.Millisecond, MaxDelay: time.Minute, Wait: w.Wait}
}

func TestInvalidKeyFailsAtOnceWithAClearMessage(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{Status: 401, File: "error_401.json"})
	var waits providertest.Waits
	p := provider.WithRetry(newProvider(t, srv), tinyPolicy(&waits))
	_, err := p.Stream(context.Background(), llm.Request{Model: "claude-sonnet-4-5", Messages: []llm.Message{userText("hi")}}, func(llm.Event) error { return nil })
	if err == nil {
		t.Fatal("no error")
	}
	if got, want := err.Error(), "anthropic: invalid API key for anthropic (HTTP 401)"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || pe.Status != 401 || pe.Retryable {
		t.Errorf("provider error = %+v", pe)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("server got %d requests, want 1 (a 401 is never retried)", n)
	}
	if len(waits.All()) != 0 {
		t.Errorf("waited %v", waits.All())
	}
}

func TestRateLimitIsRetriedAfterTheWaitTheServiceAsks(t *testing.T) {
	srv := providertest.NewServer(t,
		providertest.Response{Status: 429, File: "error_429.json", Header: map[string]string{"Retry-After": "7"}},
		providertest.Response{File: "text.sse"},
	)
	var waits providertest.Waits
	p := provider.WithRetry(newProvider(t, srv), tinyPolicy(&waits))
	var rec providertest.Recorder
	reply, err := p.Stream(context.Background(), llm.Request{Model: "claude-sonnet-4-5", Messages: []llm.Message{userText("hi")}}, rec.Emit)
	if err != nil {
		t.Fatal(err)
	}
	events := rec.Events()
	if reply.Message.Text() != "Hello, world." || len(events) != 4 {
		t.Fatalf("reply = %+v, events = %+v", reply, events)
	}
	// The wait was announced first: how long, and why.
	if r := events[0].Retry; events[0].Kind != llm.EventRetry || r == nil || r.Delay != 7*time.Second || r.Attempt != 1 || r.Reason != "anthropic: rate limited (HTTP 429)" {
		t.Errorf("first event = %+v (%+v), want the retry notice", events[0], events[0].Retry)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("server got %d requests, want 2", n)
	}
	if got := waits.All(); !reflect.DeepEqual(got, []time.Duration{7 * time.Second}) {
		t.Errorf("waits = %v, want [7s]", got)
	}
}

func TestRetriesStopAtTheirBudget(t *testing.T) {
	limited := providertest.Response{Status: 429, File: "error_429.json", Header: map[string]string{"Retry-After": "50"}}
	srv := providertest.NewServer(t, limited, limited, limited)
	var waits providertest.Waits
	policy := provider.DefaultRetryPolicy()
	policy.Wait = waits.Wait
	p := provider.WithRetry(newProvider(t, srv), policy)
	var rec providertest.Recorder
	_, err := p.Stream(context.Background(), llm.Request{Model: "claude-sonnet-4-5", Messages: []llm.Message{userText("hi")}}, rec.Emit)
	want := "anthropic: rate limited (HTTP 429) after 3 attempts; waiting 50s more would pass the retry budget of 2m0s"
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
	if got := waits.All(); !reflect.DeepEqual(got, []time.Duration{50 * time.Second, 50 * time.Second}) {
		t.Errorf("waits = %v, want two of 50s", got)
	}
	if n := len(rec.Events()); n != 2 {
		t.Errorf("%d retry notices, want one per wait", n)
	}
}

func TestServerFailuresAreRetriedUntilTheAttemptsRunOut(t *testing.T) {
	for _, tc := range []struct {
		status int
		file   string
		want   string
	}{
		{529, "error_529.json", "anthropic: overloaded (HTTP 529) after 4 attempts"},
		{500, "error_500.json", "anthropic: internal server error (HTTP 500) after 4 attempts"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			var responses []providertest.Response
			for range 4 {
				responses = append(responses, providertest.Response{Status: tc.status, File: tc.file})
			}
			srv := providertest.NewServer(t, responses...)
			var waits providertest.Waits
			p := provider.WithRetry(newProvider(t, srv), tinyPolicy(&waits))
			_, err := p.Stream(context.Background(), llm.Request{Model: "claude-sonnet-4-5", Messages: []llm.Message{userText("hi")}}, func(llm.Event) error { return nil })
			if err == nil {
				t.Fatal("no error")
			}
			if err.Error() != tc.want {
				t.Errorf("error = %q, want %q", err, tc.want)
			}
			var re *provider.RetryError
			if !errors.As(err, &re) || re.Attempts != 4 {
				t.Errorf("retry error = %+v", re)
			}
			var pe *llm.ProviderError
			if !errors.As(err, &pe) || pe.Status != tc.status || !pe.Retryable {
				t.Errorf("provider error = %+v", pe)
			}
			if n := len(srv.Requests()); n != 4 {
				t.Errorf("server got %d requests, want 4", n)
			}
			got := waits.All()
			if len(got) != 3 {
				t.Fatalf("waits = %v, want 3", got)
			}
			for i, d := range got {
				base := time.Millisecond << i
				if d < base/2 || d > base {
					t.Errorf("wait %d = %v, want within [%v, %v]", i, d, base/2, base)
				}
			}
		})
	}
}

func TestAnErrorAfterTheReplyBeganIsNotRetried(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{File: "midstream_overloaded.sse"})
	var waits providertest.Waits
	p := provider.WithRetry(newProvider(t, srv), tinyPolicy(&waits))
	var rec providertest.Recorder
	reply, err := p.Stream(context.Background(), llm.Request{Model: "claude-sonnet-4-5", Messages: []llm.Message{userText("hi")}}, rec.Emit)
	if err == nil || err.Error() != "anthropic: overloaded (HTTP 529)" {
		t.Fatalf("error = %v, want the overload, unretried", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("server got %d requests, want 1", n)
	}
	if got := rec.Events(); len(got) != 1 || got[0].Text != "Partial" {
		t.Errorf("events = %+v", got)
	}
	if reply.Message.Text() != "Partial" {
		t.Errorf("partial reply = %+v", reply.Message)
	}
}

func TestABadRequestCarriesTheServiceMessageWithoutTheKey(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{Status: 400,
		Body: `{"type":"error","error":{"type":"invalid_request_error","message":"model: claude-nonexistent is not a known model (key ` + testKey + `)"}}`})
	p := newProvider(t, srv)
	_, err := p.Stream(context.Background(), llm.Request{Model: "claude-nonexistent", Messages: []llm.Message{userText("hi")}}, func(llm.Event) error { return nil })
	if err == nil {
		t.Fatal("no error")
	}
	if !strings.Contains(err.Error(), "anthropic: invalid request: model: claude-nonexistent is not a known model") {
		t.Errorf("error = %q", err)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("error carries the key: %q", err)
	}
}

func TestAnEmitErrorStopsTheStream(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{File: "text.sse"})
	p := newProvider(t, srv)
	stop := errors.New("client went away")
	n := 0
	_, err := p.Stream(context.Background(), llm.Request{Model: "claude-sonnet-4-5", Messages: []llm.Message{userText("hi")}}, func(llm.Event) error {
		n++
		return stop
	})
	if !errors.Is(err, stop) {
		t.Errorf("error = %v, want the emit error", err)
	}
	if n != 1 {
		t.Errorf("emit called %d times after failing, want 1", n)
	}
}

func TestWithoutAKeyItIsNotConfiguredAndCallsNothing(t *testing.T) {
	srv := providertest.NewServer(t)
	p := anthropic.New(anthropic.Config{BaseURL: srv.URL, HTTPClient: srv.HTTPClient()})
	if p.Configured() {
		t.Error("configured without a key")
	}
	if p.ConfigEnv() != "ANTHROPIC_API_KEY" {
		t.Errorf("config env = %q", p.ConfigEnv())
	}
	_, err := p.Stream(context.Background(), llm.Request{Model: "claude-sonnet-4-5"}, func(llm.Event) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
		t.Errorf("error = %v, want one naming ANTHROPIC_API_KEY", err)
	}
	if len(srv.Requests()) != 0 {
		t.Error("a request was made without a key")
	}

	reg := provider.NewRegistry()
	reg.Register(provider.WithRetry(p, provider.DefaultRetryPolicy()))
	_, _, err = reg.Resolve("anthropic/claude-sonnet-4-5")
	if got, want := err.Error(), "anthropic is not configured: set ANTHROPIC_API_KEY"; got != want {
		t.Errorf("resolve error = %q, want %q", got, want)
	}
}

func TestAConnectionCutBeforeAnAnswerIsRetried(t *testing.T) {
	srv := providertest.NewServer(t,
		providertest.Response{HangUp: true},
		providertest.Response{File: "text.sse"},
	)
	var waits providertest.Waits
	p := provider.WithRetry(newProvider(t, srv), tinyPolicy(&waits))
	reply, err := p.Stream(context.Background(), llm.Request{Model: "claude-sonnet-4-5", Messages: []llm.Message{userText("hi")}}, func(llm.Event) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if reply.Message.Text() != "Hello, world." {
		t.Errorf("reply = %+v", reply.Message)
	}
	if n := len(srv.Requests()); n != 2 || len(waits.All()) != 1 {
		t.Errorf("requests = %d, waits = %v; want 2 and 1", n, waits.All())
	}
}

func TestAnAdaptiveModelGetsTheLevelAsEffort(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Response{File: "text.sse"})
	p := newProvider(t, srv)
	if _, err := p.Stream(context.Background(), llm.Request{
		Model: "claude-opus-4-6", Messages: []llm.Message{userText("hi")}, Thinking: llm.ThinkingMedium,
	}, func(llm.Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
	body := withoutCacheControl(srv.Requests()[0].JSON(t))
	if th := body["thinking"]; !reflect.DeepEqual(th, map[string]any{"type": "adaptive"}) {
		t.Errorf("thinking = %v", th)
	}
	if oc := body["output_config"]; !reflect.DeepEqual(oc, map[string]any{"effort": "medium"}) {
		t.Errorf("output_config = %v", oc)
	}
}

// withoutCacheControl returns v, a decoded request body, with its
// cache_control fields left out, for tests of what else it says.
func withoutCacheControl(v map[string]any) map[string]any {
	var strip func(any)
	strip = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			delete(x, "cache_control")
			for _, y := range x {
				strip(y)
			}
		case []any:
			for _, y := range x {
				strip(y)
			}
		}
	}
	strip(v)
	return v
}
