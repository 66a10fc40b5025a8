package openai

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/agentd-dev/agentd/internal/llm"
)

// maxCalls bounds a tool call's index, so that a stream cannot make the
// accumulator grow without end.
const maxCalls = 1 << 10

// chunk is a chunk of a Chat Completions stream, or the error object a
// service sends in its place.
type chunk struct {
	Choices []struct {
		Index        int64  `json:"index"`
		Delta        delta  `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error *streamError `json:"error"`
}

// delta is what a chunk adds to the reply. OpenAI-compatible servers put
// reasoning text in reasoning_content or reasoning.
type delta struct {
	Content          string          `json:"content"`
	ReasoningContent string          `json:"reasoning_content"`
	Reasoning        string          `json:"reasoning"`
	ToolCalls        []toolCallDelta `json:"tool_calls"`
}

type toolCallDelta struct {
	Index    int64  `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// streamError is an error object sent inside a stream.
type streamError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    any    `json:"code"`
}

// call is a tool call being streamed; its fragments arrive by index.
type call struct {
	index   int64
	id      string
	name    string
	args    strings.Builder
	started bool
}

// accumulator assembles a reply from the stream's chunks. Text and
// reasoning are emitted as they arrive; a tool call is announced once its
// name is known, its argument fragments are emitted as deltas, and the
// whole call at the end of the stream.
type accumulator struct {
	thinking     strings.Builder
	text         strings.Builder
	calls        map[int64]*call
	finishReason string
	usage        llm.Usage
	finished     bool
	price        *llm.Price // the model's, nil when it is not known
}

func (a *accumulator) add(chunk chunk, emit func(llm.Event) error) error {
	if u := chunk.Usage; u != nil && (u.PromptTokens > 0 || u.CompletionTokens > 0) {
		// prompt_tokens counts the cached tokens too; they are priced
		// apart. A count below 0, which no service sends, counts as 0.
		prompt := max(u.PromptTokens, 0)
		cached := min(max(u.PromptTokensDetails.CachedTokens, 0), prompt)
		a.usage = llm.Usage{InputTokens: int(prompt - cached), OutputTokens: int(max(u.CompletionTokens, 0)), CacheReadTokens: int(cached)}
	}
	for _, choice := range chunk.Choices {
		if choice.Index != 0 {
			continue // one reply is asked for
		}
		d := choice.Delta
		if r := reasoning(d); r != "" {
			a.thinking.WriteString(r)
			if err := emit(llm.Event{Kind: llm.EventThinking, Text: r}); err != nil {
				return err
			}
		}
		if d.Content != "" {
			a.text.WriteString(d.Content)
			if err := emit(llm.Event{Kind: llm.EventText, Text: d.Content}); err != nil {
				return err
			}
		}
		for _, tc := range d.ToolCalls {
			if err := a.addCall(tc, emit); err != nil {
				return err
			}
		}
		if choice.FinishReason != "" {
			a.finishReason = choice.FinishReason
		}
	}
	return nil
}

func (a *accumulator) addCall(tc toolCallDelta, emit func(llm.Event) error) error {
	if tc.Index < 0 || tc.Index >= maxCalls {
		return nil
	}
	if a.calls == nil {
		a.calls = map[int64]*call{}
	}
	c := a.calls[tc.Index]
	if c == nil {
		c = &call{index: tc.Index}
		a.calls[tc.Index] = c
	}
	if tc.ID != "" && c.id == "" {
		c.id = tc.ID
	}
	if c.name == "" {
		c.name = tc.Function.Name // later fragments repeat it or leave it out
	}
	if !c.started && c.name != "" {
		c.started = true
		if c.id == "" {
			c.id = fmt.Sprintf("call_%d", c.index)
		}
		head := llm.ToolCall{ID: c.id, Name: c.name}
		if err := emit(llm.Event{Kind: llm.EventToolCallStart, ToolCall: &head}); err != nil {
			return err
		}
	}
	if frag := tc.Function.Arguments; frag != "" {
		c.args.WriteString(frag)
		if c.started {
			head := llm.ToolCall{ID: c.id, Name: c.name}
			return emit(llm.Event{Kind: llm.EventToolCallDelta, Text: frag, ToolCall: &head})
		}
	}
	return nil
}

// reasoning returns the reasoning text OpenAI-compatible servers put in a
// delta's reasoning_content or reasoning field.
func reasoning(d delta) string {
	if d.ReasoningContent != "" {
		return d.ReasoningContent
	}
	return d.Reasoning
}

// ordered returns the tool calls in index order.
func (a *accumulator) ordered() []*call {
	calls := make([]*call, 0, len(a.calls))
	for _, c := range a.calls {
		calls = append(calls, c)
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i].index < calls[j].index })
	return calls
}

// finish emits each complete tool call, once the stream has ended well.
func (a *accumulator) finish(emit func(llm.Event) error) error {
	a.finished = true
	for _, c := range a.ordered() {
		if c.name == "" {
			continue
		}
		whole := c.toolCall()
		if err := emit(llm.Event{Kind: llm.EventToolCall, ToolCall: &whole}); err != nil {
			return err
		}
	}
	return nil
}

func (c *call) toolCall() llm.ToolCall {
	args := c.args.String()
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	return llm.ToolCall{ID: c.id, Name: c.name, Arguments: json.RawMessage(args)}
}

// reply returns the reply assembled so far; tool calls count only once the
// stream has ended well.
func (a *accumulator) reply() llm.Reply {
	msg := llm.Message{Role: llm.RoleAssistant}
	if a.thinking.Len() > 0 {
		msg.Parts = append(msg.Parts, llm.Part{Type: llm.PartThinking, Text: a.thinking.String()})
	}
	if a.text.Len() > 0 {
		msg.Parts = append(msg.Parts, llm.Part{Type: llm.PartText, Text: a.text.String()})
	}
	hasCall := false
	if a.finished {
		for _, c := range a.ordered() {
			if c.name == "" {
				continue
			}
			tc := c.toolCall()
			msg.Parts = append(msg.Parts, llm.Part{Type: llm.PartToolCall, ToolCall: &tc})
			hasCall = true
		}
	}
	stop := llm.StopEnd
	switch {
	case a.finishReason == "tool_calls" || a.finishReason == "function_call" || hasCall:
		stop = llm.StopToolUse
	case a.finishReason == "length":
		stop = llm.StopMaxToken
	}
	usage := a.usage
	if a.price != nil {
		usage = a.price.Priced(usage)
	}
	return llm.Reply{Message: msg, StopReason: stop, Usage: usage}
}
