// Package openai is the provider of OpenAI's models and of any server that
// speaks OpenAI's Chat Completions API (Ollama, vLLM, the llama.cpp
// server), through the official Go SDK: streaming chat completions with
// function tools. It reads no environment: its key and base URL are given to
// New (the program reads OPENAI_API_KEY and OPENAI_BASE_URL). A base URL
// without a key is a local server and counts as configured. The SDK's own
// retries are off; a caller wraps the provider with provider.WithRetry.
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
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/provider"
	"github.com/agentd-dev/agentd/internal/redact"
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

// models are the models listed, best known first; any other model name
// (a local server's) is passed to the service as it is.
var models = []string{"gpt-5", "gpt-5-mini", "gpt-4.1", "o4-mini"}

var (
	_ llm.Provider          = (*Provider)(nil)
	_ provider.Configurable = (*Provider)(nil)
	_ provider.AnyModel     = (*Provider)(nil)
)

// Config configures the provider.
type Config struct {
	// APIKey is sent as a bearer token when set.
	APIKey string
	// BaseURL replaces DefaultBaseURL, e.g. http://localhost:11434/v1 for
	// Ollama.
	BaseURL string
	// HTTPClient replaces the SDK's client when set.
	HTTPClient *http.Client
}

// Provider streams replies from a Chat Completions endpoint. It is safe
// for concurrent use; it is constant after New.
type Provider struct {
	key        string
	configured bool
	official   bool // it speaks to OpenAI's own API, whose prices are known
	chat       sdk.ChatCompletionService
}

// New returns the provider. With neither a key nor a base URL it is listed
// but not configured, and every Stream fails saying which variable to set.
func New(cfg Config) *Provider {
	baseURL := cfg.BaseURL
	if baseURL == "" {
		baseURL = DefaultBaseURL
	}
	httpClient := cfg.HTTPClient
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	// The service is built without the client's environment defaults, so
	// that only what New is given configures it.
	opts := []option.RequestOption{
		option.WithBaseURL(baseURL),
		option.WithHTTPClient(httpClient),
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	return &Provider{
		key:        cfg.APIKey,
		configured: cfg.APIKey != "" || cfg.BaseURL != "",
		official:   strings.TrimRight(baseURL, "/") == DefaultBaseURL,
		chat:       sdk.NewChatCompletionService(opts...),
	}
}

// Name returns "openai".
func (p *Provider) Name() string { return Name }

// Models lists the known models, best first.
func (p *Provider) Models() []string { return append([]string(nil), models...) }

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
	stream := p.chat.NewStreaming(ctx, params)
	defer stream.Close()

	var acc accumulator
	if p.official {
		acc.price = prices[req.Model]
	}
	for stream.Next() {
		if err := acc.add(stream.Current(), emit); err != nil {
			return acc.reply(), err
		}
	}
	if err := stream.Err(); err != nil {
		return acc.reply(), p.mapError(ctx, err)
	}
	if err := acc.finish(emit); err != nil {
		return acc.reply(), err
	}
	if acc.finishReason == "" {
		return acc.reply(), &llm.ProviderError{Provider: Name, Message: "the stream ended before the reply was complete", Retryable: true}
	}
	return acc.reply(), nil
}

// mapError turns the SDK's failure into an *llm.ProviderError.
func (p *Provider) mapError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		var header http.Header
		if apiErr.Response != nil {
			header = apiErr.Response.Header
		}
		return provider.StatusError(Name, apiErr.StatusCode, p.scrub(apiErr.Message), header)
	}
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		return p.streamError(se)
	}
	return provider.TransportError(Name, err)
}

// streamError maps an error object sent inside a stream that began well.
func (p *Provider) streamError(se *ssestream.StreamError) error {
	var body struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(se.Event.Data, &body)
	msg := body.Error.Message
	if msg == "" {
		msg = "the service sent an error"
	}
	kind := strings.ToLower(body.Error.Type)
	if c, ok := body.Error.Code.(string); ok {
		kind += " " + strings.ToLower(c)
	}
	retryable := strings.Contains(kind, "server_error") || strings.Contains(kind, "rate_limit") || strings.Contains(kind, "overloaded")
	return &llm.ProviderError{Provider: Name, Message: "stream failed: " + p.scrub(msg), Retryable: retryable}
}

// scrub removes the key from a service's words.
func (p *Provider) scrub(msg string) string {
	if p.key != "" {
		msg = strings.ReplaceAll(msg, p.key, redact.Marker)
	}
	return msg
}

// buildParams translates an llm.Request into a chat completion request.
func buildParams(req llm.Request) (sdk.ChatCompletionNewParams, error) {
	params := sdk.ChatCompletionNewParams{
		Model:         req.Model,
		StreamOptions: sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)},
	}
	if req.MaxTokens > 0 {
		params.MaxCompletionTokens = sdk.Int(int64(req.MaxTokens))
	}
	if effort := ReasoningEffort(req.Model, req.Thinking); effort != "" {
		params.ReasoningEffort = shared.ReasoningEffort(effort)
	}
	for _, spec := range req.Tools {
		fn := shared.FunctionDefinitionParam{Name: spec.Name}
		if spec.Description != "" {
			fn.Description = sdk.String(spec.Description)
		}
		if len(spec.Parameters) > 0 {
			var schema map[string]any
			if err := json.Unmarshal(spec.Parameters, &schema); err != nil {
				return params, &llm.ProviderError{Provider: Name, Message: "tool " + spec.Name + ": parameters are not a JSON object: " + err.Error()}
			}
			fn.Parameters = shared.FunctionParameters(schema)
		}
		params.Tools = append(params.Tools, sdk.ChatCompletionFunctionTool(fn))
	}
	if req.System != "" {
		params.Messages = append(params.Messages, sdk.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		params.Messages = append(params.Messages, messageParams(m)...)
	}
	return params, nil
}

// messageParams translates one message; a tool message becomes one message
// per result.
func messageParams(m llm.Message) []sdk.ChatCompletionMessageParamUnion {
	switch m.Role {
	case llm.RoleAssistant:
		var a sdk.ChatCompletionAssistantMessageParam
		if text := m.Text(); text != "" {
			a.Content.OfString = sdk.String(text)
		}
		for _, c := range m.ToolCalls() {
			args := string(c.Arguments)
			if strings.TrimSpace(args) == "" {
				args = "{}"
			}
			a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
					ID:       c.ID,
					Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: args},
				},
			})
		}
		if a.Content.OfString.Valid() || len(a.ToolCalls) > 0 {
			return []sdk.ChatCompletionMessageParamUnion{{OfAssistant: &a}}
		}
		return nil
	default:
		var out []sdk.ChatCompletionMessageParamUnion
		for _, part := range m.Parts {
			if part.Type == llm.PartToolResult && part.ToolResult != nil {
				content := part.ToolResult.Content
				if part.ToolResult.IsError {
					content = "Error: " + content
				}
				out = append(out, sdk.ToolMessage(content, part.ToolResult.CallID))
			}
		}
		if text := m.Text(); text != "" {
			out = append(out, sdk.UserMessage(text))
		}
		return out
	}
}
