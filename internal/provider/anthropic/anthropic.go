// Package anthropic is the provider of Anthropic's Claude models, through
// the streaming Messages API: tools, tool results
// and extended thinking. It reads no environment: its key and base URL are
// given to New (the program reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL).
// It does not retry; a caller wraps the provider with provider.WithRetry so
// that one policy governs every provider.
//
// Requests carry prompt caching breakpoints (cache_control) on the tools,
// the system prompt and the conversation's stable prefix (see
// markCachePrefixes); the usage a reply reports splits the prompt into
// tokens read from the cache, written to it, and neither.
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
	"net/http"
	"strings"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/provider"
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

// adaptiveModels think adaptively: the API marks budgeted thinking as
// deprecated for them, so for them a thinking level is sent as adaptive thinking with that level as
// the output effort.
var adaptiveModels = map[string]bool{"claude-opus-4-6": true, "claude-mythos-preview": true}

var (
	_ llm.Provider          = (*Provider)(nil)
	_ llm.Describer         = (*Provider)(nil)
	_ provider.Configurable = (*Provider)(nil)
	_ provider.AnyModel     = (*Provider)(nil)
	_ provider.Lister       = (*Provider)(nil)
)

// DefaultBaseURL is the service's address when none is given.
const DefaultBaseURL = "https://api.anthropic.com"

// apiVersion is the version of the Messages API the requests are written
// for.
const apiVersion = "2026-10-21"

// Config configures the provider.
type Config struct {
	// APIKey is required for the provider to be configured.
	APIKey string
	// BaseURL replaces DefaultBaseURL when set.
	BaseURL string
	// HTTPClient replaces http.DefaultClient when set.
	HTTPClient *http.Client
}

// Provider streams replies from Anthropic's Messages API. It is safe for
// concurrent use; it is constant after New.
type Provider struct {
	key    string
	base   string // the service's address, without a trailing slash
	custom bool   // base is not DefaultBaseURL: a gateway that may serve any name
	scope  string // ListingScope's answer
	url    string // the Messages endpoint
	client *http.Client
}

// New returns the provider. Without an API key it is listed but not
// configured, and every Stream fails saying which variable to set.
func New(cfg Config) *Provider {
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	client := cfg.HTTPClient
	if client == nil {
		client = http.DefaultClient
	}
	base = strings.TrimRight(base, "/")
	p := &Provider{key: cfg.APIKey, base: base, custom: base != DefaultBaseURL, url: base + "/v1/messages", client: client}
	if p.key != "" {
		p.scope = base + " " + provider.KeyDigest(p.key)
	}
	return p
}

// Name returns "anthropic".
func (p *Provider) Name() string { return Name }

// Models lists the models of Table, best first.
func (p *Provider) Models() []string { return Table.IDs() }

// AnyModel reports whether the provider talks to a service at a base URL
// other than Anthropic's (a gateway), which decides itself which names it
// serves.
func (p *Provider) AnyModel() bool { return p.custom }

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
	// The key travels in x-api-key, as Anthropic's API documents for
	// every request.
	header := http.Header{
		"X-Api-Key":         {p.key},
		"Anthropic-Version": {apiVersion},
	}
	resp, err := provider.Post(ctx, p.client, Name, p.url, header, params, p.key)
	if err != nil {
		return llm.Reply{}, err
	}
	defer resp.Body.Close()

	acc := accumulator{price: Table.Describe(req.Model).Price}
	events := provider.NewEvents(resp.Body)
	for events.Next() {
		switch events.Name() {
		case "", "ping":
			continue
		case "error":
			return acc.reply(), p.streamError(events.Data())
		}
		var ev streamEvent
		if err := json.Unmarshal(events.Data(), &ev); err != nil {
			return acc.reply(), &llm.ProviderError{Provider: Name, Message: "the stream sent an event that is not JSON: " + err.Error()}
		}
		if err := acc.add(ev, emit); err != nil {
			return acc.reply(), err
		}
	}
	if err := events.Err(); err != nil {
		if ctx.Err() != nil {
			return acc.reply(), ctx.Err()
		}
		return acc.reply(), provider.TransportError(Name, err)
	}
	if !acc.stopped {
		return acc.reply(), &llm.ProviderError{Provider: Name, Message: "the stream ended before the reply was complete", Retryable: true}
	}
	return acc.reply(), nil
}

// streamError maps an error event inside a stream that began well: its
// type says what happened.
func (p *Provider) streamError(data []byte) error {
	var body struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(data, &body)
	return provider.StatusError(Name, statusOfType(body.Error.Type), provider.Scrub(body.Error.Message, p.key), nil)
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

// The Messages API's request, as the service reads it.
type (
	messageRequest struct {
		Model        string          `json:"model"`
		MaxTokens    int64           `json:"max_tokens"`
		Stream       bool            `json:"stream"`
		System       []contentBlock  `json:"system,omitempty"`
		Messages     []message       `json:"messages"`
		Tools        []tool          `json:"tools,omitempty"`
		Thinking     *thinkingConfig `json:"thinking,omitempty"`
		OutputConfig *outputConfig   `json:"output_config,omitempty"`
	}
	thinkingConfig struct {
		Type         string `json:"type"` // "enabled" or "adaptive"
		BudgetTokens int64  `json:"budget_tokens,omitempty"`
	}
	outputConfig struct {
		Effort string `json:"effort"`
	}
	tool struct {
		Name         string         `json:"name"`
		Description  string         `json:"description,omitempty"`
		InputSchema  map[string]any `json:"input_schema"`
		CacheControl *cacheControl  `json:"cache_control,omitempty"`
	}
	// cacheControl marks the end of a prefix of the request for the
	// service to cache.
	cacheControl struct {
		Type string `json:"type"` // "ephemeral"
	}
	message struct {
		Role    string         `json:"role"`
		Content []contentBlock `json:"content"`
	}
	// contentBlock is a block of any type; each type sets its own fields.
	contentBlock struct {
		Type      string          `json:"type"`
		Text      string          `json:"text,omitempty"`
		Thinking  *string         `json:"thinking,omitempty"` // set, even to "", on a thinking block
		Signature string          `json:"signature,omitempty"`
		Data      string          `json:"data,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Input     json.RawMessage `json:"input,omitempty"`
		ToolUseID string          `json:"tool_use_id,omitempty"`
		Content   []contentBlock  `json:"content,omitempty"`
		IsError   bool            `json:"is_error,omitempty"`
		// CacheControl is set on the last block of a cached prefix.
		CacheControl *cacheControl `json:"cache_control,omitempty"`
	}
)

// buildParams translates an llm.Request into the Messages API's request.
func buildParams(req llm.Request) (messageRequest, error) {
	maxTokens := int64(req.MaxTokens)
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	params := messageRequest{Model: req.Model, Stream: true}
	if budget := ThinkingBudget(req.Thinking); budget > 0 && adaptiveModels[req.Model] {
		params.Thinking = &thinkingConfig{Type: "adaptive"}
		params.OutputConfig = &outputConfig{Effort: req.Thinking}
	} else if budget > 0 {
		if maxTokens <= budget {
			maxTokens = budget + DefaultMaxTokens
		}
		params.Thinking = &thinkingConfig{Type: "enabled", BudgetTokens: budget}
	}
	params.MaxTokens = maxTokens
	if req.System != "" {
		params.System = []contentBlock{{Type: "text", Text: req.System}}
	}
	for _, spec := range req.Tools {
		t, err := toolParam(spec)
		if err != nil {
			return params, err
		}
		params.Tools = append(params.Tools, t)
	}
	params.Messages = messageParams(req.Messages)
	markCachePrefixes(&params)
	return params, nil
}

// MaxCacheBreakpoints is the most cache_control blocks the Messages API
// takes in one request.
const MaxCacheBreakpoints = 4

// markCachePrefixes sets the prompt caching breakpoints Anthropic's prompt
// caching documents, at most MaxCacheBreakpoints: the last tool (the tools
// are the first part of the prompt), the system prompt, and two in the
// conversation: its last message, which moves with each request so that
// the next one reads all of this one from the cache, and the last message
// before the latest prompt, the end of the previous turn, which stays put
// for every model call of the turn. The service reads the longest cached
// prefix at or before a breakpoint, and ignores one whose prefix is too
// short to cache.
func markCachePrefixes(params *messageRequest) {
	ephemeral := &cacheControl{Type: "ephemeral"}
	if n := len(params.Tools); n > 0 {
		params.Tools[n-1].CacheControl = ephemeral
	}
	if n := len(params.System); n > 0 {
		params.System[n-1].CacheControl = ephemeral
	}
	msgs := params.Messages
	last := len(msgs) - 1
	if last < 0 {
		return
	}
	markLastBlock(&msgs[last], ephemeral)
	for u := last; u >= 1; u-- {
		if msgs[u].Role == "user" && hasPrompt(msgs[u]) {
			markLastBlock(&msgs[u-1], ephemeral)
			return
		}
	}
}

// hasPrompt reports whether a user message holds text a person wrote (a
// prompt or steering), beside any tool results.
func hasPrompt(m message) bool {
	for _, b := range m.Content {
		if b.Type == "text" {
			return true
		}
	}
	return false
}

// markLastBlock sets cc on the last block of m that may carry it: thinking
// blocks may not.
func markLastBlock(m *message, cc *cacheControl) {
	for i := len(m.Content) - 1; i >= 0; i-- {
		if t := m.Content[i].Type; t != "thinking" && t != "redacted_thinking" {
			m.Content[i].CacheControl = cc
			return
		}
	}
}

// toolParam translates a tool; its parameters, a JSON schema, become the
// input schema, whose type is always object.
func toolParam(spec llm.ToolSpec) (tool, error) {
	schema := map[string]any{}
	if len(spec.Parameters) > 0 {
		if err := json.Unmarshal(spec.Parameters, &schema); err != nil || schema == nil {
			msg := "not an object"
			if err != nil {
				msg = err.Error()
			}
			return tool{}, &llm.ProviderError{Provider: Name, Message: "tool " + spec.Name + ": parameters are not a JSON object: " + msg}
		}
	}
	schema["type"] = "object"
	return tool{Name: spec.Name, Description: spec.Description, InputSchema: schema}, nil
}

// messageParams translates the conversation. Tool results travel as
// tool_result blocks of a user message; consecutive messages of one role
// are merged, so a tool result and a steering message that follows it make
// one user message with the results first.
func messageParams(msgs []llm.Message) []message {
	var out []message
	lastAssistant := false
	for _, m := range msgs {
		assistant := m.Role == llm.RoleAssistant
		blocks := contentBlocks(m)
		if len(blocks) == 0 {
			continue
		}
		if len(out) > 0 && assistant == lastAssistant {
			last := &out[len(out)-1]
			last.Content = append(last.Content, blocks...)
			continue
		}
		lastAssistant = assistant
		role := "user"
		if assistant {
			role = "assistant"
		}
		out = append(out, message{Role: role, Content: blocks})
	}
	return out
}

func contentBlocks(m llm.Message) []contentBlock {
	var blocks []contentBlock
	for _, part := range m.Parts {
		switch part.Type {
		case llm.PartText:
			if part.Text != "" {
				blocks = append(blocks, contentBlock{Type: "text", Text: part.Text})
			}
		case llm.PartThinking:
			// Only the assistant's own signed thinking can go back; the
			// API refuses thinking it cannot verify.
			if m.Role != llm.RoleAssistant || part.Signature == "" {
				continue
			}
			if data, ok := strings.CutPrefix(part.Signature, RedactedPrefix); ok && part.Text == "" {
				blocks = append(blocks, contentBlock{Type: "redacted_thinking", Data: data})
			} else {
				blocks = append(blocks, contentBlock{Type: "thinking", Thinking: &part.Text, Signature: part.Signature})
			}
		case llm.PartToolCall:
			if c := part.ToolCall; c != nil {
				blocks = append(blocks, contentBlock{Type: "tool_use", ID: c.ID, Name: c.Name, Input: objectOrEmpty(c.Arguments)})
			}
		case llm.PartToolResult:
			if r := part.ToolResult; r != nil {
				block := contentBlock{Type: "tool_result", ToolUseID: r.CallID, IsError: r.IsError}
				if r.Content != "" {
					block.Content = []contentBlock{{Type: "text", Text: r.Content}}
				}
				blocks = append(blocks, block)
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
