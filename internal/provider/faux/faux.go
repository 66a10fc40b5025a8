// Package faux is agentd's built-in offline model provider: deterministic,
// needing no key and no network, and the default when no other provider is
// configured. It can call tools, so the whole agent loop runs offline.
//
// # Default behaviour
//
// The provider offers one model, "echo" (spec "faux/echo"); every other
// model name behaves the same. It reads the last user message:
//
//   - When the message quotes shell commands in backticks (`ls -la`, or a
//     fenced ``` block, which counts as one command), the model calls the
//     "bash" tool with {"command": "…"} for each command in order, one call
//     per reply. It knows which commands have run by counting the tool
//     results after that message. When all have run, it answers with a
//     short summary quoting each command's output (the first 20 lines, at
//     most 4000 bytes each). When the request offers no bash tool, it says
//     so instead.
//   - Any other message gets a reply of a few sentences derived from the
//     message, streamed as word-sized text deltas, without delays.
//
// With a thinking level other than off, a short thinking part comes first.
//
// Every reply, scripted or not, reports its usage as a model's would,
// counted from the text: an input token per word of the request (system
// prompt, messages, tool results) and an output token per delta or tool
// call. It has no price, so no cost.
//
// # Scripts
//
// A script (Config.ScriptPath; the program reads AGENTD_FAUX_SCRIPT) plays
// replies exactly, one per model call in order, whatever the request;
// when they are used up every call fails with an error saying so. The
// file is JSON:
//
//	{
//	  "comment": "anything; comments are allowed on the script, replies and steps",
//	  "replies": [
//	    {"steps": [
//	      {"thinking": "Let me look."},
//	      {"text": "Listing "},
//	      {"delay": "20ms"},
//	      {"text": "the files."},
//	      {"tool": "bash", "arguments": {"command": "ls -la"}, "id": "call-1"}
//	    ]},
//	    {"steps": [{"error": {"status": 529, "message": "overloaded", "retryAfter": "1s"}}]},
//	    {"steps": [{"repeat": 100000, "text": "x"}]}
//	  ]
//	}
//
// A step has exactly one kind:
//
//   - "text": a text delta; "thinking": a thinking delta. With "repeat": N
//     the delta is emitted N times (at most MaxRepeat), for benchmarks.
//   - "delay": a Go duration to wait before the next step (at most
//     MaxDelay); the call's context ends it early.
//   - "tool": a tool call to the named tool with "arguments" (a JSON
//     object, {} when left out) and an optional "id" (made up otherwise).
//   - "error": the reply fails with {"status", "message", "retryAfter"}:
//     an HTTP status (optional; 408, 409, 429, 529 and 5xx are retryable),
//     the message (defaults to the status's text) and an optional Go
//     duration the failure asks callers to wait. An error ends its reply:
//     steps after it are refused. Steps before it are emitted first, which
//     scripts a failure in the middle of a reply.
//
// A script may state its model's context window, in tokens, with
// "contextWindow": 4096 (from MinContextWindow to MaxContextWindow); the
// provider then describes every model with it (llm.Describer), which
// context compaction goes by. A script with a window and no "replies"
// list answers by the default behaviour.
//
// # Summaries
//
// A request whose system prompt is llm.SummarySystem, context
// compaction's, is answered with a summary of the conversation it writes
// out: the person's requests, newest last, each clipped, within
// summaryMax bytes; it takes no reply of a script's "replies". A script
// with a "summaries" list (replies, in the same shape) plays those to the
// summary requests instead, in order, so a test can script a summary or
// its failure.
//
// A reply with a tool call stops with llm.StopToolUse, others with
// llm.StopEnd. Decoding is strict: an unknown field, a step with no kind or
// two, or a bad duration is an error naming the reply and step.
// testdata/example.json holds every kind of step.
package faux

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/provider"
)

// Name is the provider's name in "faux/<model>".
const Name = "faux"

// DefaultModel is the model the provider lists.
const DefaultModel = "echo"

// Bounds of the outputs a summary quotes.
const (
	summaryLines = 20
	summaryBytes = 4000
)

// Config configures the provider.
type Config struct {
	// ScriptPath names a script file to play instead of the default
	// behaviour; empty for none.
	ScriptPath string
}

// Provider is the faux provider. It is safe for concurrent use.
type Provider struct {
	script     *Script // constant; nil for the default behaviour
	scriptName string  // constant

	mu          sync.Mutex
	next        int // guarded by mu: the next reply of script to play
	nextSummary int // guarded by mu: the next summary of script to play
}

// New returns the provider, reading and decoding the script when
// cfg.ScriptPath is set.
func New(cfg Config) (*Provider, error) {
	if cfg.ScriptPath == "" {
		return &Provider{}, nil
	}
	data, err := os.ReadFile(cfg.ScriptPath)
	if err != nil {
		return nil, fmt.Errorf("faux: %w", err)
	}
	s, err := ParseScript(data)
	if err != nil {
		return nil, fmt.Errorf("faux: %s: %w", cfg.ScriptPath, err)
	}
	return &Provider{script: s, scriptName: cfg.ScriptPath}, nil
}

// NewScripted returns the provider playing s.
func NewScripted(s *Script) *Provider {
	return &Provider{script: s, scriptName: "the script"}
}

// Name returns "faux".
func (p *Provider) Name() string { return Name }

// Models returns [DefaultModel].
func (p *Provider) Models() []string { return []string{DefaultModel} }

// Stream answers req: from the script when there is one, else by the
// default behaviour.
func (p *Provider) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Reply, error) {
	if err := ctx.Err(); err != nil {
		return llm.Reply{}, err
	}
	summary := req.System == llm.SummarySystem
	switch {
	case summary && p.script != nil && p.script.ScriptedSummaries:
		return p.play(ctx, req, emit, p.script.Summaries, &p.nextSummary, "summary")
	case summary:
		return summarize(req, emit)
	case p.script != nil && p.script.Scripted:
		return p.play(ctx, req, emit, p.script.Replies, &p.next, "reply")
	}
	return respond(req, emit)
}

// Describe returns the window the script states, if it states one.
func (p *Provider) Describe(string) llm.ModelInfo {
	if p.script == nil || p.script.ContextWindow == 0 {
		return llm.ModelInfo{}
	}
	return llm.ModelInfo{ContextWindow: p.script.ContextWindow, Known: true}
}

// builder assembles a reply while emitting its events.
type builder struct {
	emit  func(llm.Event) error
	parts []llm.Part
	texts []*strings.Builder // the text of each text or thinking part, nil for others
	calls int
	out   int // deltas emitted
}

// delta emits a text or thinking delta, extending the last part when it is
// of the same kind.
func (b *builder) delta(kind, text string) error {
	partType, evKind := llm.PartText, llm.EventText
	if kind == StepThinking {
		partType, evKind = llm.PartThinking, llm.EventThinking
	}
	n := len(b.parts)
	if n == 0 || b.parts[n-1].Type != partType {
		b.parts = append(b.parts, llm.Part{Type: partType})
		b.texts = append(b.texts, &strings.Builder{})
		n++
	}
	b.texts[n-1].WriteString(text)
	b.out++
	return b.emit(llm.Event{Kind: evKind, Text: text})
}

// words emits text as word-sized deltas, each word with the spaces after it.
func (b *builder) words(kind, text string) error {
	for text != "" {
		i := strings.IndexFunc(text, isSpace)
		if i < 0 {
			i = len(text)
		}
		j := i
		for j < len(text) && isSpace(rune(text[j])) {
			j++
		}
		if err := b.delta(kind, text[:j]); err != nil {
			return err
		}
		text = text[j:]
	}
	return nil
}

func isSpace(r rune) bool { return r == ' ' || r == '\n' || r == '\t' }

// toolCall emits a tool call as a start, one arguments delta and the whole.
func (b *builder) toolCall(id, name string, args json.RawMessage) error {
	head := llm.ToolCall{ID: id, Name: name}
	if err := b.emit(llm.Event{Kind: llm.EventToolCallStart, ToolCall: &head}); err != nil {
		return err
	}
	h2 := head
	if err := b.emit(llm.Event{Kind: llm.EventToolCallDelta, Text: string(args), ToolCall: &h2}); err != nil {
		return err
	}
	call := llm.ToolCall{ID: id, Name: name, Arguments: args}
	b.parts = append(b.parts, llm.Part{Type: llm.PartToolCall, ToolCall: &call})
	b.texts = append(b.texts, nil)
	b.calls++
	b.out++
	whole := call
	return b.emit(llm.Event{Kind: llm.EventToolCall, ToolCall: &whole})
}

func (b *builder) reply(in int) llm.Reply {
	stop := llm.StopEnd
	if b.calls > 0 {
		stop = llm.StopToolUse
	}
	parts := make([]llm.Part, len(b.parts))
	for i, p := range b.parts {
		if b.texts[i] != nil {
			p.Text = b.texts[i].String()
		}
		parts[i] = p
	}
	return llm.Reply{
		Message:    llm.Message{Role: llm.RoleAssistant, Parts: parts},
		StopReason: stop,
		Usage:      llm.Usage{InputTokens: in, OutputTokens: b.out},
	}
}

// play plays the next of replies, counted by next (guarded by mu); what
// names one in errors.
func (p *Provider) play(ctx context.Context, req llm.Request, emit func(llm.Event) error, replies []Reply, next *int, what string) (llm.Reply, error) {
	p.mu.Lock()
	n := *next
	if n < len(replies) {
		*next++
	}
	p.mu.Unlock()
	if n >= len(replies) {
		return llm.Reply{}, &llm.ProviderError{Provider: Name, Message: fmt.Sprintf(
			"%s has no %s left for model call %d: it holds %d", p.scriptName, what, n+1, len(replies))}
	}
	b := &builder{emit: emit}
	in := countWords(req)
	for i, st := range replies[n].Steps {
		switch st.Kind {
		case StepText, StepThinking:
			for r := range st.Repeat {
				if r%1024 == 1023 && ctx.Err() != nil {
					return b.reply(in), ctx.Err()
				}
				if err := b.delta(st.Kind, st.Text); err != nil {
					return b.reply(in), err
				}
			}
		case StepDelay:
			if err := provider.Sleep(ctx, st.Delay); err != nil {
				return b.reply(in), err
			}
		case StepTool:
			id := st.CallID
			if id == "" {
				id = fmt.Sprintf("faux-%d-%d", n+1, i+1)
			}
			if err := b.toolCall(id, st.Tool, st.Arguments); err != nil {
				return b.reply(in), err
			}
		case StepError:
			pe := &llm.ProviderError{Provider: Name, Status: st.Status, Message: st.Message, Retryable: provider.RetryableStatus(st.Status)}
			if st.RetryAfter > 0 && pe.Retryable {
				return b.reply(in), &provider.RetryAfterError{Err: pe, After: st.RetryAfter}
			}
			return b.reply(in), pe
		}
	}
	return b.reply(in), nil
}
