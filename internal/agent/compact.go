package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentd-dev/agentd/internal/llm"
)

// Context compaction: when a conversation grows toward its model's
// window, its older part is replaced, for the model, by a summary the
// model writes of it. This file holds the mechanism; the worker decides
// when and records the result.

// BytesPerToken is the estimate of a token's size when no provider has
// counted: a request of n bytes is taken for n/4 tokens.
const BytesPerToken = 4

// SummaryPrefix opens the user message that carries a summary in place of
// the messages it replaces.
const SummaryPrefix = "[The earlier part of this conversation was compacted; its summary follows.]\n\n"

// Bounds of what a summary request writes out.
const (
	// resultHead and resultTail are the bytes of a tool result the
	// summary request keeps, from its start and its end.
	resultHead = 600
	resultTail = 200
	// argsMax bounds a tool call's arguments as written out.
	argsMax = 300
	// textHead and textTail are the bytes of a long text the summary
	// request keeps, from its start and its end.
	textHead = 4000
	textTail = 2000
	// summaryShare is the share of the window, in percent, that the
	// written-out conversation may take in a summary request.
	summaryShare = 60
)

// SummaryReserve is the tokens set aside for a summary when choosing what
// to keep.
const SummaryReserve = 400

// ErrNothingToCompact is returned when the conversation has no older part
// to summarize.
var ErrNothingToCompact = errors.New("the conversation is too short to compact")

// ByteSize returns the bytes msgs take as the model is sent them, roughly:
// their text, tool calls' arguments and tool results.
func ByteSize(msgs []llm.Message) int {
	n := 0
	for _, m := range msgs {
		n += messageBytes(m)
	}
	return n
}

func messageBytes(m llm.Message) int {
	n := len(m.Role)
	for _, p := range m.Parts {
		n += len(p.Text) + len(p.Signature)
		if c := p.ToolCall; c != nil {
			n += len(c.ID) + len(c.Name) + len(c.Arguments)
		}
		if r := p.ToolResult; r != nil {
			n += len(r.CallID) + len(r.Name) + len(r.Content)
		}
	}
	return n
}

// FixedBytes returns the bytes of a request that compaction cannot
// shrink: its system prompt and its tools' specifications.
func FixedBytes(system string, specs []llm.ToolSpec) int {
	n := len(system)
	for _, s := range specs {
		n += len(s.Name) + len(s.Description) + len(s.Parameters)
	}
	return n
}

// CutPoint chooses where the kept part of history starts: history[:cut]
// is summarized. keep > 0 keeps that many recent messages; keep == 0 keeps
// as many as fit budget bytes, and always a last message of the person's,
// the request the model is about to answer. A tool's results are never
// kept without the call they answer: the cut moves past them. It returns
// ErrNothingToCompact when nothing new would be summarized.
func CutPoint(history []llm.Message, keep, budget int) (int, error) {
	cut := len(history)
	if keep > 0 {
		cut = max(len(history)-keep, 0)
	} else {
		size := 0
		for cut > 0 {
			size += messageBytes(history[cut-1])
			if size > budget {
				break
			}
			cut--
		}
	}
	for cut < len(history) && history[cut].Role == llm.RoleTool {
		cut++
	}
	if keep == 0 && cut == len(history) && cut > 0 && history[cut-1].Role == llm.RoleUser {
		// The request the model is about to answer stays as it was.
		cut--
	}
	summarized := history[:cut]
	if len(summarized) == 0 || len(summarized) == 1 && IsSummary(summarized[0]) {
		return 0, ErrNothingToCompact
	}
	return cut, nil
}

// IsSummary reports whether m carries a compaction's summary.
func IsSummary(m llm.Message) bool {
	return m.Role == llm.RoleUser && strings.HasPrefix(m.Text(), SummaryPrefix)
}

// SummaryMessage is the message that stands for the summarized messages.
func SummaryMessage(summary string) llm.Message {
	return llm.Message{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartText, Text: SummaryPrefix + summary}}}
}

// Compacted returns the conversation the model is sent once the first n
// messages of history are replaced by summary.
func Compacted(history []llm.Message, n int, summary string) []llm.Message {
	out := make([]llm.Message, 0, len(history)-n+1)
	out = append(out, SummaryMessage(summary))
	return append(out, history[n:]...)
}

// SummaryRequest is the request that asks model for a summary of msgs,
// written out within window's share: tool results cut to their head and
// tail, and, when that is still too long, the middle of the conversation
// left out (an earlier summary, at its start, stays).
func SummaryRequest(model string, msgs []llm.Message, window int) llm.Request {
	var lines []string
	for _, m := range msgs {
		lines = append(lines, writeOut(m)...)
	}
	limit := window * summaryShare / 100 * BytesPerToken
	text := strings.Join(lines, "\n")
	if len(text) > limit {
		// Keep the start (an earlier summary, the first requests) and
		// as much of the end as fits.
		headBytes := limit / 3
		head, tail := []string{}, []string{}
		size := 0
		i := 0
		for ; i < len(lines) && size+len(lines[i]) < headBytes; i++ {
			head = append(head, lines[i])
			size += len(lines[i]) + 1
		}
		j := len(lines)
		for j > i && size+len(lines[j-1]) < limit-100 {
			j--
			tail = append(tail, lines[j])
			size += len(lines[j]) + 1
		}
		reverse(tail)
		text = strings.Join(head, "\n") + fmt.Sprintf("\n[… %d lines of the conversation left out …]\n", j-i) + strings.Join(tail, "\n")
	}
	return llm.Request{
		Model:  model,
		System: llm.SummarySystem,
		Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartText,
			Text: "Summarize this conversation:\n\n" + text}}}},
	}
}

func reverse(s []string) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

// writeOut writes one message out as lines for a summary request.
func writeOut(m llm.Message) []string {
	if IsSummary(m) {
		return []string{"summary of what came before: " + strings.TrimPrefix(m.Text(), SummaryPrefix)}
	}
	var out []string
	for _, p := range m.Parts {
		switch {
		case p.Type == llm.PartText && p.Text != "":
			out = append(out, m.Role+": "+cut(p.Text, textHead, textTail))
		case p.ToolCall != nil:
			out = append(out, fmt.Sprintf("assistant called %s %s", p.ToolCall.Name, cut(compactJSON(p.ToolCall.Arguments), argsMax, 0)))
		case p.ToolResult != nil:
			status := "result"
			if p.ToolResult.IsError {
				status = "error"
			}
			out = append(out, fmt.Sprintf("%s %s: %s", p.ToolResult.Name, status, cut(p.ToolResult.Content, resultHead, resultTail)))
		}
	}
	return out
}

func compactJSON(raw json.RawMessage) string {
	return strings.Join(strings.Fields(string(raw)), " ")
}

// cut keeps the first head and last tail bytes of s, on rune boundaries,
// saying how much it left out between them.
func cut(s string, head, tail int) string {
	if len(s) <= head+tail+40 {
		return s
	}
	h, t := head, len(s)-tail
	for h > 0 && !isRuneStart(s[h]) {
		h--
	}
	for t < len(s) && !isRuneStart(s[t]) {
		t++
	}
	return fmt.Sprintf("%s […%d bytes cut…] %s", s[:h], t-h, s[t:])
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// Summarize asks p for a summary of msgs. It fails when the model fails
// or answers with no text.
func Summarize(ctx context.Context, p llm.Provider, model string, msgs []llm.Message, window int) (string, llm.Usage, error) {
	reply, err := p.Stream(ctx, SummaryRequest(model, msgs, window), func(llm.Event) error { return nil })
	if err != nil {
		return "", reply.Usage, err
	}
	summary := strings.TrimSpace(reply.Message.Text())
	if summary == "" {
		return "", reply.Usage, errors.New("the model answered with no summary")
	}
	// A summary takes at most a quarter of the window.
	if limit := window / 4 * BytesPerToken; len(summary) > limit {
		summary = cut(summary, limit*2/3, limit/3-60)
	}
	return summary, reply.Usage, nil
}
