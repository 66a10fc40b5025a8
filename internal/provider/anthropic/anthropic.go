// Package anthropic is the provider of Anthropic's Claude models, through
// the official Go SDK and the streaming Messages API: tools, tool results
// and extended thinking. It reads no environment: its key and base URL are
// given to New (the program reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL).
// The SDK's own retries are off; a caller wraps the provider with
// provider.WithRetry so that one policy governs every provider.
//
// Thinking levels map to extended thinking budgets (see ThinkingBudget),
// except for the models that think adaptively (claude-opus-4-6), where the
// level becomes the output effort. Thinking blocks come back as
// llm.PartThinking parts carrying their signature, and are sent back
// unchanged on the next request. A redacted
// thinking block is kept as a thinking part with empty text whose Signature
// is RedactedPrefix followed by the block's data.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/provider"
	"github.com/agentd-dev/agentd/internal/redact"
)

// Name is the provider's name in "anthropic/<model>".
const Name = "anthropic"

// The environment variables the program reads to configure the provider.
const (
	APIKeyEnv  = "ANTHROPIC_API_KEY"
	BaseURLEnv = "ANTHROPIC_BASE_URL"
)

// DefaultMaxTokens is the reply budget when a request sets none.
const DefaultMaxTokens = 8192

// RedactedPrefix starts the Signature of a thinking part that holds a
// redacted thinking block.
const RedactedPrefix = "redacted:"

// models are the models listed, best known first; any other model name is
// passed to the service as it is.
var models = []string{"claude-sonnet-4-5", "claude-opus-4-6", "claude-haiku-4-5"}

// adaptiveModels think adaptively: the SDK marks budgeted thinking as
// deprecated for them (and warns on standard error when it is used), so
// for them a thinking level is sent as adaptive thinking with that level as
// the output effort.
var adaptiveModels = map[string]bool{"claude-opus-4-6": true, "claude-mythos-preview": true}

var (
	_ llm.Provider          = (*Provider)(nil)
	_ provider.Configurable = (*Provider)(nil)
)

// Config configures the provider.
type Config struct {
	// APIKey is required for the provider to be configured.
	APIKey string
	// BaseURL replaces https://api.anthropic.com when set.
	BaseURL string
	// HTTPClient replaces the SDK's client when set.
	HTTPClient *http.Client
}

// Provider streams replies from Anthropic's Messages API. It is safe for
// concurrent use; it is constant after New.
type Provider struct {
	key    string
	client sdk.Client
}

// New returns the provider. Without an API key it is listed but not
// configured, and every Stream fails saying which variable to set.
func New(cfg Config) *Provider {
	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &Provider{key: cfg.APIKey, client: sdk.NewClient(opts...)}
}

// Name returns "anthropic".
func (p *Provider) Name() string { return Name }

// Models lists the known models, best first.
func (p *Provider) Models() []string { return append([]string(nil), models...) }

// Configured reports whether an API key was given.
func (p *Provider) Configured() bool { return p.key != "" }

// ConfigEnv returns ANTHROPIC_API_KEY.
func (p *Provider) ConfigEnv() string { return APIKeyEnv }

// ThinkingBudget returns the extended thinking budget in tokens of a
// thinking level: 0 (off), 2048 (low), 8192 (medium), 24576 (high). An
// unknown level is off.
func ThinkingBudget(level string) int64 {
	switch level {
	case llm.ThinkingLow:
		return 2048
	case llm.ThinkingMedium:
		return 8192
	case llm.ThinkingHigh:
		return 24576
	}
	return 0
}

// Stream calls the Messages API with stream set and passes each text,
// thinking and tool call event to emit as it arrives.
func (p *Provider) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Reply, error) {
	if p.key == "" {
		return llm.Reply{}, &llm.ProviderError{Provider: Name, Message: "not configured: set " + APIKeyEnv}
	}
	params, err := buildParams(req)
	if err != nil {
		return llm.Reply{}, err
	}
	stream := p.client.Messages.NewStreaming(ctx, params)
	defer stream.Close()

	acc := accumulator{price: prices[req.Model]}
	for stream.Next() {
		if err := acc.add(stream.Current(), emit); err != nil {
			return acc.reply(), err
		}
	}
	if err := stream.Err(); err != nil {
		return acc.reply(), p.mapError(ctx, err)
	}
	if !acc.stopped {
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
	if !errors.As(err, &apiErr) {
		return provider.TransportError(Name, err)
	}
	status := apiErr.StatusCode
	if status < 300 {
		// An error event inside a stream that began well: its type says
		// what happened.
		status = statusOfType(string(apiErr.Type()))
	}
	var header http.Header
	if apiErr.Response != nil {
		header = apiErr.Response.Header
	}
	msg := apiErr.Message
	if p.key != "" {
		msg = strings.ReplaceAll(msg, p.key, redact.Marker)
	}
	return provider.StatusError(Name, status, msg, header)
}

// statusOfType maps an error type of Anthropic's API to its HTTP status.
func statusOfType(t string) int {
	switch t {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "billing_error":
		return http.StatusPaymentRequired
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "timeout_error":
		return http.StatusGatewayTimeout
	case "overloaded_error":
		return provider.StatusOverloaded
	}
	return http.StatusInternalServerError
}

// buildParams translates an llm.Request into the Messages API's request.
func buildParams(req llm.Request) (sdk.MessageNewParams, error) {
	maxTokens := int64(req.MaxTokens)
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	params := sdk.MessageNewParams{Model: req.Model}
	if budget := ThinkingBudget(req.Thinking); budget > 0 && adaptiveModels[req.Model] {
		params.Thinking = sdk.ThinkingConfigParamUnion{OfAdaptive: &sdk.ThinkingConfigAdaptiveParam{}}
		params.OutputConfig.Effort = sdk.OutputConfigEffort(req.Thinking)
	} else if budget > 0 {
		if maxTokens <= budget {
			maxTokens = budget + DefaultMaxTokens
		}
		params.Thinking = sdk.ThinkingConfigParamOfEnabled(budget)
	}
	params.MaxTokens = maxTokens
	if req.System != "" {
		params.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	for _, spec := range req.Tools {
		tool, err := toolParam(spec)
		if err != nil {
			return params, err
		}
		params.Tools = append(params.Tools, tool)
	}
	params.Messages = messageParams(req.Messages)
	return params, nil
}

func toolParam(spec llm.ToolSpec) (sdk.ToolUnionParam, error) {
	var schema map[string]any
	if len(spec.Parameters) > 0 {
		if err := json.Unmarshal(spec.Parameters, &schema); err != nil {
			return sdk.ToolUnionParam{}, &llm.ProviderError{Provider: Name, Message: "tool " + spec.Name + ": parameters are not a JSON object: " + err.Error()}
		}
	}
	input := sdk.ToolInputSchemaParam{}
	for k, v := range schema {
		switch k {
		case "type":
		case "properties":
			input.Properties = v
		case "required":
			if list, ok := v.([]any); ok {
				for _, r := range list {
					if s, ok := r.(string); ok {
						input.Required = append(input.Required, s)
					}
				}
			}
		default:
			if input.ExtraFields == nil {
				input.ExtraFields = map[string]any{}
			}
			input.ExtraFields[k] = v
		}
	}
	tool := sdk.ToolUnionParamOfTool(input, spec.Name)
	if spec.Description != "" {
		tool.OfTool.Description = sdk.String(spec.Description)
	}
	return tool, nil
}

// messageParams translates the conversation. Tool results travel as
// tool_result blocks of a user message; consecutive messages of one role
// are merged, so a tool result and a steering message that follows it make
// one user message with the results first.
func messageParams(msgs []llm.Message) []sdk.MessageParam {
	var out []sdk.MessageParam
	lastAssistant := false
	for _, m := range msgs {
		assistant := m.Role == llm.RoleAssistant
		blocks := contentBlocks(m)
		if len(blocks) == 0 {
			continue
		}
		if len(out) > 0 && assistant == lastAssistant {
			last := &out[len(out)-1]
			if assistant {
				last.OfAssistant.Content = append(last.OfAssistant.Content, blocks...)
			} else {
				last.OfUser.Content = append(last.OfUser.Content, blocks...)
			}
			continue
		}
		lastAssistant = assistant
		if assistant {
			out = append(out, sdk.NewAssistantMessage(blocks...))
		} else {
			out = append(out, sdk.NewUserMessage(blocks...))
		}
	}
	return out
}

func contentBlocks(m llm.Message) []sdk.ContentBlockParamUnion {
	var blocks []sdk.ContentBlockParamUnion
	for _, part := range m.Parts {
		switch part.Type {
		case llm.PartText:
			if part.Text != "" {
				blocks = append(blocks, sdk.NewTextBlock(part.Text))
			}
		case llm.PartThinking:
			// Only the assistant's own signed thinking can go back; the
			// API refuses thinking it cannot verify.
			if m.Role != llm.RoleAssistant || part.Signature == "" {
				continue
			}
			if data, ok := strings.CutPrefix(part.Signature, RedactedPrefix); ok && part.Text == "" {
				blocks = append(blocks, sdk.NewRedactedThinkingBlock(data))
			} else {
				blocks = append(blocks, sdk.NewThinkingBlock(part.Signature, part.Text))
			}
		case llm.PartToolCall:
			if part.ToolCall != nil {
				blocks = append(blocks, sdk.NewToolUseBlock(part.ToolCall.ID, objectOrEmpty(part.ToolCall.Arguments), part.ToolCall.Name))
			}
		case llm.PartToolResult:
			if r := part.ToolResult; r != nil {
				block := sdk.ToolResultBlockParam{ToolUseID: r.CallID}
				if r.Content != "" {
					block.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: r.Content}}}
				}
				if r.IsError {
					block.IsError = sdk.Bool(true)
				}
				blocks = append(blocks, sdk.ContentBlockParamUnion{OfToolResult: &block})
			}
		}
	}
	return blocks
}

// objectOrEmpty returns args when it is a JSON object and {} otherwise:
// the API takes only an object as a tool call's input, and a model's
// malformed arguments were already answered with an error result.
func objectOrEmpty(args json.RawMessage) json.RawMessage {
	trimmed := strings.TrimSpace(string(args))
	if strings.HasPrefix(trimmed, "{") && json.Valid(args) {
		return args
	}
	return json.RawMessage("{}")
}
