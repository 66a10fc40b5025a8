package faux

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentd-dev/agentd/internal/llm"
)

// bashTool is the tool the default behaviour calls.
const bashTool = "bash"

// respond is the default behaviour: run the commands the last user message
// quotes, one tool call per reply, then summarise; or answer in words.
func respond(req llm.Request, emit func(llm.Event) error) (llm.Reply, error) {
	b := &builder{emit: emit}
	in := countWords(req)
	at, prompt := lastUser(req.Messages)
	cmds := Commands(prompt)
	results := toolResultsAfter(req.Messages, at)

	if thinks(req.Thinking) {
		if err := b.words(StepThinking, thought(prompt, cmds, results)); err != nil {
			return b.reply(in), err
		}
	}
	switch {
	case len(cmds) > 0 && !offers(req.Tools, bashTool):
		err := b.words(StepText, fmt.Sprintf("I would run %s, but this session offers me no bash tool, so I cannot.", quoteList(cmds)))
		return b.reply(in), err
	case len(cmds) > 0 && len(results) < len(cmds):
		n := len(results)
		intro := fmt.Sprintf("Running `%s`.", cmds[n])
		if len(cmds) > 1 {
			intro = fmt.Sprintf("Running `%s` (%d of %d).", cmds[n], n+1, len(cmds))
		}
		if err := b.words(StepText, intro); err != nil {
			return b.reply(in), err
		}
		args, _ := json.Marshal(map[string]string{"command": cmds[n]})
		err := b.toolCall(fmt.Sprintf("faux-%d-%d", at+1, n+1), bashTool, args)
		return b.reply(in), err
	case len(cmds) > 0:
		err := b.words(StepText, summary(cmds, results))
		return b.reply(in), err
	}
	err := b.words(StepText, answer(prompt))
	return b.reply(in), err
}

// lastUser returns the index and text of the last user message, -1 and ""
// when there is none.
func lastUser(msgs []llm.Message) (int, string) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleUser {
			return i, msgs[i].Text()
		}
	}
	return -1, ""
}

// toolResultsAfter returns the tool results of the messages after index
// at, in order.
func toolResultsAfter(msgs []llm.Message, at int) []llm.ToolResult {
	var results []llm.ToolResult
	for _, m := range msgs[at+1:] {
		for _, p := range m.Parts {
			if p.Type == llm.PartToolResult && p.ToolResult != nil {
				results = append(results, *p.ToolResult)
			}
		}
	}
	return results
}

func offers(tools []llm.ToolSpec, name string) bool {
	for _, t := range tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

func thinks(level string) bool {
	return level == llm.ThinkingLow || level == llm.ThinkingMedium || level == llm.ThinkingHigh
}

func thought(prompt string, cmds []string, results []llm.ToolResult) string {
	s := fmt.Sprintf("The last message reads %q. ", clip(prompt, 80))
	switch {
	case len(cmds) == 0:
		return s + "It quotes no command, so I will answer in words."
	case len(results) < len(cmds):
		return s + fmt.Sprintf("It quotes %d command(s); %d ran so far, so the next is `%s`.", len(cmds), len(results), cmds[len(results)])
	}
	return s + "Every command it quotes has run, so I will sum up their output."
}

// summary quotes each command's output, bounded; a command refused
// before it ran is named, its refusal not quoted again: the person saw
// it as the call's result.
func summary(cmds []string, results []llm.ToolResult) string {
	var sb strings.Builder
	refused := 0
	for i := range cmds {
		if notRun(results[i]) {
			refused++
		}
	}
	switch ran := len(cmds) - refused; {
	case ran == 1:
		sb.WriteString("I ran 1 command.")
	default:
		fmt.Fprintf(&sb, "I ran %d commands.", ran)
	}
	for i, cmd := range cmds {
		r := results[i]
		if notRun(r) {
			fmt.Fprintf(&sb, "\n\n`%s` was not run: the call was refused, for the reason given with it.", cmd)
			continue
		}
		out := strings.TrimRight(r.Content, "\n \t")
		verb := "printed"
		if r.IsError {
			verb = "failed with"
		}
		if strings.TrimSpace(out) == "" {
			if r.IsError {
				fmt.Fprintf(&sb, "\n\n`%s` failed without output.", cmd)
			} else {
				fmt.Fprintf(&sb, "\n\n`%s` printed nothing.", cmd)
			}
			continue
		}
		fmt.Fprintf(&sb, "\n\n`%s` %s:\n```\n%s\n```", cmd, verb, bounded(out))
	}
	return sb.String()
}

// notRun reports whether r is the result of a call refused before its
// tool ran ("bash was not run: …").
func notRun(r llm.ToolResult) bool {
	return r.IsError && strings.HasPrefix(r.Content, r.Name+" was not run: ")
}

// bounded returns the first summaryLines lines of out, at most summaryBytes,
// saying how much was left out.
func bounded(out string) string {
	lines := strings.Split(out, "\n")
	kept := lines
	if len(kept) > summaryLines {
		kept = kept[:summaryLines]
	}
	s := strings.Join(kept, "\n")
	cut := false
	if len(s) > summaryBytes {
		s = clip(s, summaryBytes)
		cut = true
	}
	if more := len(lines) - len(kept); more > 0 {
		s += fmt.Sprintf("\n… (%d more lines)", more)
	} else if cut {
		s += "\n… (cut)"
	}
	return s
}

// answer is the reply to a message quoting no command.
func answer(prompt string) string {
	words := len(strings.Fields(prompt))
	if words == 0 {
		return "Hello! I am the faux model, agentd's offline stand-in. Put a shell command in backticks, like `ls -la`, and I will run it with the bash tool."
	}
	noun := "words"
	if words == 1 {
		noun = "word"
	}
	return fmt.Sprintf("You said: %q. That is %d %s and %d characters. "+
		"I am the faux model, agentd's offline stand-in, so I answer the same way every time. "+
		"Put a shell command in backticks, like `ls -la`, and I will run it with the bash tool.",
		clip(prompt, 120), words, noun, utf8.RuneCountInString(prompt))
}

func quoteList(cmds []string) string {
	q := make([]string, len(cmds))
	for i, c := range cmds {
		q[i] = "`" + c + "`"
	}
	return strings.Join(q, ", ")
}

// clip shortens s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func countWords(req llm.Request) int {
	n := len(strings.Fields(req.System))
	for _, m := range req.Messages {
		for _, p := range m.Parts {
			n += len(strings.Fields(p.Text))
			if p.ToolResult != nil {
				n += len(strings.Fields(p.ToolResult.Content))
			}
		}
	}
	return n
}

// summaryMax bounds the summary the default behaviour writes.
const summaryMax = 1200

// summarize answers a compaction's request: the lines of the conversation
// it writes out that are the person's ("user: …"), newest last, each
// clipped, as many as fit summaryMax.
func summarize(req llm.Request, emit func(llm.Event) error) (llm.Reply, error) {
	b := &builder{emit: emit}
	in := countWords(req)
	_, text := lastUser(req.Messages)
	var asks []string
	for line := range strings.Lines(text) {
		if ask, ok := strings.CutPrefix(line, "user: "); ok {
			asks = append(asks, clip(ask, 100))
		}
	}
	head := fmt.Sprintf("Summary of %d earlier requests.", len(asks))
	out, size := []string{}, len(head)
	for i := len(asks) - 1; i >= 0 && size+len(asks[i])+3 <= summaryMax; i-- {
		out = append(out, asks[i])
		size += len(asks[i]) + 3
	}
	slices.Reverse(out)
	if len(out) < len(asks) {
		head += fmt.Sprintf(" The last %d:", len(out))
	}
	if len(out) > 0 {
		head += " " + strings.Join(out, " | ")
	}
	err := b.words(StepText, head)
	return b.reply(in), err
}
