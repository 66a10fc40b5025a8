// Package openai is the provider of OpenAI's models and of any server that
// speaks OpenAI's Chat Completions API (Ollama, vLLM, the llama.cpp
// server): streaming chat completions with function tools. It reads no environment: its key and base URL are given to
// New (the program reads OPENAI_API_KEY and OPENAI_BASE_URL). A base URL
// without a key is a local server and counts as configured. It does not
// retry; a caller wraps the provider with provider.WithRetry.
//
// Thinking levels become reasoning_effort (low, medium, high) only for
// OpenAI's reasoning models (names starting o1, o3, o4 or gpt-5); for any
// other model, and for the off level, the field is left out, since other
// models and servers refuse it or ignore it. Reasoning text that
// OpenAI-compatible servers stream as delta.reasoning_content or
// delta.reasoning comes out as thinking events. Thinking parts are not sent
// back: Chat Completions has no place for them. A tool result marked as an
// error is sent with "Error: " before its content, Chat Completions having
// no error flag.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/provider"
)

// Name is the provider's name in "openai/<model>".
const Name = "openai"

// The environment variables the program reads to configure the provider.
const (
	APIKeyEnv  = "OPENAI_API_KEY"
	BaseURLEnv = "OPENAI_BASE_URL"
)

// DefaultBaseURL is the base URL when none is given.
const DefaultBaseURL = "https://api.openai.com/v1"

var (
	_ llm.Provider          = (*Provider)(nil)
	_ provider.Configurable = (*Provider)(nil)
	_ provider.AnyModel     = (*Provider)(nil)
	_ provider.Lister       = (*Provider)(nil)
	_ llm.Describer         = (*Provider)(nil)
)

// Config configures the provider.
type Config struct {
	// APIKey is sent as a bearer token when set.
	APIKey string
	// BaseURL replaces DefaultBaseURL, e.g. http://localhost:11434/v1 for
	// Ollama.
	BaseURL string
	// HTTPClient replaces http.DefaultClient when set.
	HTTPClient *http.Client
}

// Provider streams replies from a Chat Completions endpoint. It is safe
// for concurrent use; it is constant after New.
type Provider struct {
	key        string
	configured bool
	official   bool   // it speaks to OpenAI's own API, whose prices are known
	base       string // the base URL, without a trailing slash
	scope      string // ListingScope's answer
	url        string // the Chat Completions endpoint
	client     *http.Client
}

// New returns the provider. With neither a key nor a base URL it is listed
// but not configured, and every Stream fails saying which variable to set.
func New(cfg Config) *Provider {
	baseURL := cfg.BaseURL
	if baseURL == "" {
		baseURL = DefaultBaseURL
	}
	client := cfg.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	p := &Provider{
		key:        cfg.APIKey,
		configured: cfg.APIKey != "" || cfg.BaseURL != "",
		official:   strings.TrimRight(baseURL, "/") == DefaultBaseURL,
		base:       strings.TrimRight(baseURL, "/"),
		url:        strings.TrimRight(baseURL, "/") + "/chat/completions",
		client:     client,
	}
	if p.configured {
		p.scope = p.base + " " + provider.KeyDigest(p.key)
	}
	return p
}

// Name returns "openai".
func (p *Provider) Name() string { return Name }

// Models lists the known models, best first.
func (p *Provider) Models() []string { return Table.IDs() }

// Configured reports whether a key or a base URL was given.
func (p *Provider) Configured() bool { return p.configured }

// ConfigEnv returns OPENAI_API_KEY.
func (p *Provider) ConfigEnv() string { return APIKeyEnv }

// AnyModel reports whether the provider talks to a server at a base URL
// other than OpenAI's, which may serve any model name.
func (p *Provider) AnyModel() bool { return !p.official }

// ReasoningEffort returns the reasoning_effort sent for a model at a
// thinking level, "" when none is sent.
func ReasoningEffort(model, level string) string {
	if level != llm.ThinkingLow && level != llm.ThinkingMedium && level != llm.ThinkingHigh {
		return ""
	}
	m := strings.ToLower(model)
	for _, prefix := range []string{"o1", "o3", "o4", "gpt-5"} {
		if strings.HasPrefix(m, prefix) {
			return level
		}
	}
	return ""
}

// Stream calls the Chat Completions API with stream set and passes each
// text, reasoning and tool call event to emit as it arrives.
func (p *Provider) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Reply, error) {
	if !p.configured {
		return llm.Reply{}, &llm.ProviderError{Provider: Name, Message: "not configured: set " + APIKeyEnv + " (or " + BaseURLEnv + " for a local server)"}
	}
	params, err := buildParams(req)
	if err != nil {
		return llm.Reply{}, err
	}
	header := http.Header{}
	if p.key != "" {
		header.Set("Authorization", "Bearer "+p.key)
	}
	resp, err := provider.Post(ctx, p.client, Name, p.url, header, params, p.key)
	if err != nil {
		return llm.Reply{}, err
	}
	defer resp.Body.Close()

	var acc accumulator
	if p.official {
		acc.price = Table.Describe(req.Model).Price
	}
	events := provider.NewEvents(resp.Body)
	for events.Next() {
		data := events.Data()
		if bytes.HasPrefix(data, []byte("[DONE]")) {
			break
		}
		var c chunk
		if err := json.Unmarshal(data, &c); err != nil {
			return acc.reply(), &llm.ProviderError{Provider: Name, Message: "the stream sent a chunk that is not JSON: " + err.Error()}
		}
		if c.Error != nil {
			return acc.reply(), p.streamError(*c.Error)
		}
		if err := acc.add(c, emit); err != nil {
			return acc.reply(), err
		}
	}
	if err := events.Err(); err != nil {
		if ctx.Err() != nil {
			return acc.reply(), ctx.Err()
		}
		return acc.reply(), provider.TransportError(Name, err)
	}
	if err := acc.finish(emit); err != nil {
		return acc.reply(), err
	}
	if acc.finishReason == "" {
		return acc.reply(), &llm.ProviderError{Provider: Name, Message: "the stream ended before the reply was complete", Retryable: true}
	}
	return acc.reply(), nil
}

// streamError maps an error object sent inside a stream that began well.
func (p *Provider) streamError(e streamError) error {
	msg := e.Message
	if msg == "" {
		msg = "the service sent an error"
	}
	kind := strings.ToLower(e.Type)
	if c, ok := e.Code.(string); ok {
		kind += " " + strings.ToLower(c)
	}
	retryable := strings.Contains(kind, "server_error") || strings.Contains(kind, "rate_limit") || strings.Contains(kind, "overloaded")
	return &llm.ProviderError{Provider: Name, Message: "stream failed: " + p.scrub(msg), Retryable: retryable}
}

// scrub removes the key from a service's words.
func (p *Provider) scrub(msg string) string {
	if p.key != "" {
		msg = provider.Scrub(msg, p.key)
	}
	return msg
}

// The Chat Completions request, as the service reads it.
type (
	chatRequest struct {
		Model               string        `json:"model"`
		Stream              bool          `json:"stream"`
		StreamOptions       streamOptions `json:"stream_options"`
		MaxCompletionTokens int           `json:"max_completion_tokens,omitempty"`
		ReasoningEffort     string        `json:"reasoning_effort,omitempty"`
		Tools               []tool        `json:"tools,omitempty"`
		Messages            []message     `json:"messages"`
	}
	streamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	}
	tool struct {
		Type     string   `json:"type"` // "function"
		Function function `json:"function"`
	}
	function struct {
		Name        string         `json:"name"`
		Description string         `json:"description,omitempty"`
		Parameters  map[string]any `json:"parameters,omitempty"`
	}
	message struct {
		Role       string     `json:"role"`
		Content    *string    `json:"content,omitempty"` // nil for an assistant's message of tool calls alone
		ToolCalls  []toolCall `json:"tool_calls,omitempty"`
		ToolCallID string     `json:"tool_call_id,omitempty"`
	}
	toolCall struct {
		ID       string       `json:"id"`
		Type     string       `json:"type"` // "function"
		Function functionCall `json:"function"`
	}
	functionCall struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
)

// buildParams translates an llm.Request into a chat completion request.
func buildParams(req llm.Request) (chatRequest, error) {
	params := chatRequest{
		Model:               req.Model,
		Stream:              true,
		StreamOptions:       streamOptions{IncludeUsage: true},
		MaxCompletionTokens: max(req.MaxTokens, 0),
		ReasoningEffort:     ReasoningEffort(req.Model, req.Thinking),
	}
	for _, spec := range req.Tools {
		fn := function{Name: spec.Name, Description: spec.Description}
		if len(spec.Parameters) > 0 {
			if err := json.Unmarshal(spec.Parameters, &fn.Parameters); err != nil {
				return params, &llm.ProviderError{Provider: Name, Message: "tool " + spec.Name + ": parameters are not a JSON object: " + err.Error()}
			}
		}
		params.Tools = append(params.Tools, tool{Type: "function", Function: fn})
	}
	if req.System != "" {
		params.Messages = append(params.Messages, message{Role: "system", Content: &req.System})
	}
	for _, m := range req.Messages {
		params.Messages = append(params.Messages, messageParams(m)...)
	}
	return params, nil
}

// messageParams translates one message; a tool message becomes one message
// per result.
func messageParams(m llm.Message) []message {
	switch m.Role {
	case llm.RoleAssistant:
		a := message{Role: "assistant"}
		if text := m.Text(); text != "" {
			a.Content = &text
		}
		for _, c := range m.ToolCalls() {
			args := string(c.Arguments)
			if strings.TrimSpace(args) == "" {
				args = "{}"
			}
			a.ToolCalls = append(a.ToolCalls, toolCall{ID: c.ID, Type: "function", Function: functionCall{Name: c.Name, Arguments: args}})
		}
		if a.Content != nil || len(a.ToolCalls) > 0 {
			return []message{a}
		}
		return nil
	default:
		var out []message
		for _, part := range m.Parts {
			if part.Type == llm.PartToolResult && part.ToolResult != nil {
				content := part.ToolResult.Content
				if part.ToolResult.IsError {
					content = "Error: " + content
				}
				out = append(out, message{Role: "tool", Content: &content, ToolCallID: part.ToolResult.CallID})
			}
		}
		if text := m.Text(); text != "" {
			out = append(out, message{Role: "user", Content: &text})
		}
		return out
	}
}
