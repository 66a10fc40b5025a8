package tui

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/agentd-dev/agentd/protocol"
)

// InstructionsNote says which project instruction files a turn's model
// was given: "instructions: /p/AGENTS.md, /p/sub/CLAUDE.md (cut to 512
// bytes)".
func InstructionsNote(files []protocol.InstructionFile) string {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.Path
		if f.Truncated {
			names[i] += fmt.Sprintf(" (cut to %d bytes)", f.Bytes)
		}
	}
	return "instructions: " + strings.Join(names, ", ")
}

// UsageText says what a turn's model calls used: "2,250 tokens in (2,000
// read from the cache), 30 out, 2 model calls, $0.0018". The cost is left out
// when it is not known (0).
func UsageText(u protocol.TurnUsage) string {
	in := u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
	s := thousands(in) + " tokens in"
	var cache []string
	if u.CacheReadTokens > 0 {
		cache = append(cache, thousands(u.CacheReadTokens)+" read from the cache")
	}
	if u.CacheWriteTokens > 0 {
		cache = append(cache, thousands(u.CacheWriteTokens)+" written to the cache")
	}
	if len(cache) > 0 {
		s += " (" + strings.Join(cache, ", ") + ")"
	}
	s += ", " + thousands(u.OutputTokens) + " out"
	if u.ModelCalls == 1 {
		s += ", 1 model call"
	} else {
		s += ", " + thousands(u.ModelCalls) + " model calls"
	}
	switch c := u.CostUSD; {
	case c >= 1:
		s += fmt.Sprintf(", $%.2f", c)
	case c > 0:
		s += fmt.Sprintf(", $%.4f", c)
	}
	return s
}

// RetryText says that a model call is made again after a wait, and why:
// "retrying in 4s: anthropic: overloaded (HTTP 529) (attempt 1 of 6
// failed)". The wait is rounded up to a whole second.
func RetryText(r protocol.RetryNotice) string {
	secs := (max(r.DelayMs, 0) + 999) / 1000
	return fmt.Sprintf("retrying in %ds: %s (attempt %d of %d failed)", secs, r.Reason, r.Attempt, r.MaxAttempts)
}

// thousands writes n with a comma between each three digits: 12,345.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}
