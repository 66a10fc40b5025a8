package anthropic

import (
	"encoding/json"
	"strings"

	"github.com/agentd-dev/agentd/internal/llm"
)

// maxBlocks bounds a content block's index, so that a stream cannot make
// the accumulator grow without end.
const maxBlocks = 1 << 16

// streamEvent is an event of the Messages API's stream; each type sets its
// own fields.
type streamEvent struct {
	Type    string `json:"type"`
	Index   int64  `json:"index"`
	Message struct {
		Usage usage `json:"usage"`
	} `json:"message"`
	ContentBlock struct {
		Type      string `json:"type"`
		Text      string `json:"text"`
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
		Data      string `json:"data"`
		ID        string `json:"id"`
		Name      string `json:"name"`
	} `json:"content_block"`
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		Signature   string `json:"signature"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage usage `json:"usage"`
}

// usage is a stream's token counts.
type usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// block is a content block being streamed.
type block struct {
	kind      string // "text", "thinking", "redacted_thinking", "tool_use", or another the API added
	text      strings.Builder
	signature strings.Builder
	data      string
	call      llm.ToolCall
	args      strings.Builder
	done      bool
}

// accumulator assembles a reply from the stream's events, in the order of
// the content blocks' indexes.
type accumulator struct {
	blocks     []*block
	stopReason string
	usage      llm.Usage
	stopped    bool       // message_stop arrived
	price      *llm.Price // the model's, nil when it is not known
}

func (a *accumulator) block(index int64) *block {
	if index < 0 || index > maxBlocks {
		return nil
	}
	for int(index) >= len(a.blocks) {
		a.blocks = append(a.blocks, nil)
	}
	return a.blocks[index]
}

// add takes one stream event, emitting what it carries.
func (a *accumulator) add(ev streamEvent, emit func(llm.Event) error) error {
	switch ev.Type {
	case "message_start":
		// A count below 0, which no service sends, counts as 0.
		u := ev.Message.Usage
		a.usage = llm.Usage{
			InputTokens: int(max(u.InputTokens, 0)), OutputTokens: int(max(u.OutputTokens, 0)),
			CacheReadTokens: int(max(u.CacheReadInputTokens, 0)), CacheWriteTokens: int(max(u.CacheCreationInputTokens, 0)),
		}
	case "content_block_start":
		if ev.Index < 0 || ev.Index > maxBlocks || a.block(ev.Index) != nil {
			return nil // out of range, or started twice
		}
		cb := ev.ContentBlock
		b := &block{kind: cb.Type}
		a.blocks[ev.Index] = b
		switch cb.Type {
		case "text":
			if cb.Text != "" {
				b.text.WriteString(cb.Text)
				return emit(llm.Event{Kind: llm.EventText, Text: cb.Text})
			}
		case "thinking":
			b.signature.WriteString(cb.Signature)
			if cb.Thinking != "" {
				b.text.WriteString(cb.Thinking)
				return emit(llm.Event{Kind: llm.EventThinking, Text: cb.Thinking})
			}
		case "redacted_thinking":
			b.data = cb.Data
		case "tool_use":
			b.call = llm.ToolCall{ID: cb.ID, Name: cb.Name}
			// The start event's input is an empty object; the arguments
			// arrive as JSON deltas.
			call := b.call
			return emit(llm.Event{Kind: llm.EventToolCallStart, ToolCall: &call})
		}
	case "content_block_delta":
		b := a.block(ev.Index)
		if b == nil {
			return nil
		}
		d := ev.Delta
		if d.Text == "" && d.Thinking == "" && d.Signature == "" && d.PartialJSON == "" {
			return nil
		}
		switch d.Type {
		case "text_delta":
			b.text.WriteString(d.Text)
			return emit(llm.Event{Kind: llm.EventText, Text: d.Text})
		case "thinking_delta":
			b.text.WriteString(d.Thinking)
			return emit(llm.Event{Kind: llm.EventThinking, Text: d.Thinking})
		case "signature_delta":
			b.signature.WriteString(d.Signature)
		case "input_json_delta":
			if b.kind != "tool_use" {
				return nil
			}
			b.args.WriteString(d.PartialJSON)
			call := b.call
			return emit(llm.Event{Kind: llm.EventToolCallDelta, Text: d.PartialJSON, ToolCall: &call})
		}
	case "content_block_stop":
		b := a.block(ev.Index)
		if b == nil || b.done {
			return nil
		}
		b.done = true
		if b.kind == "tool_use" {
			b.call.Arguments = arguments(b.args.String())
			call := b.call
			return emit(llm.Event{Kind: llm.EventToolCall, ToolCall: &call})
		}
	case "message_delta":
		if r := ev.Delta.StopReason; r != "" {
			a.stopReason = r
		}
		// Its counts are cumulative; one it leaves out (or sends as 0)
		// stands as message_start said.
		for _, c := range []struct {
			n  int64
			to *int
		}{
			{ev.Usage.InputTokens, &a.usage.InputTokens},
			{ev.Usage.OutputTokens, &a.usage.OutputTokens},
			{ev.Usage.CacheReadInputTokens, &a.usage.CacheReadTokens},
			{ev.Usage.CacheCreationInputTokens, &a.usage.CacheWriteTokens},
		} {
			if c.n > 0 {
				*c.to = int(c.n)
			}
		}
	case "message_stop":
		a.stopped = true
	}
	return nil
}

// arguments returns a tool call's accumulated JSON, {} when there was none.
func arguments(s string) json.RawMessage {
	if strings.TrimSpace(s) == "" {
		return json.RawMessage("{}")
	}
	return json.RawMessage(s)
}

// reply returns the reply assembled so far.
func (a *accumulator) reply() llm.Reply {
	msg := llm.Message{Role: llm.RoleAssistant}
	hasCall := false
	for _, b := range a.blocks {
		if b == nil {
			continue
		}
		switch b.kind {
		case "text":
			if b.text.Len() > 0 {
				msg.Parts = append(msg.Parts, llm.Part{Type: llm.PartText, Text: b.text.String()})
			}
		case "thinking":
			msg.Parts = append(msg.Parts, llm.Part{Type: llm.PartThinking, Text: b.text.String(), Signature: b.signature.String()})
		case "redacted_thinking":
			msg.Parts = append(msg.Parts, llm.Part{Type: llm.PartThinking, Signature: RedactedPrefix + b.data})
		case "tool_use":
			if !b.done {
				continue // cut off mid-call: not a call anyone can run
			}
			call := b.call
			msg.Parts = append(msg.Parts, llm.Part{Type: llm.PartToolCall, ToolCall: &call})
			hasCall = true
		}
	}
	usage := a.usage
	if a.price != nil {
		usage = a.price.Priced(usage)
	}
	return llm.Reply{Message: msg, StopReason: stopReason(a.stopReason, hasCall), Usage: usage}
}

func stopReason(r string, hasCall bool) string {
	switch r {
	case "tool_use":
		return llm.StopToolUse
	case "max_tokens", "model_context_window_exceeded":
		return llm.StopMaxToken
	}
	if hasCall && r == "" {
		return llm.StopToolUse
	}
	return llm.StopEnd
}
