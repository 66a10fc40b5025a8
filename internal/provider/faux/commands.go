package faux

import "strings"

// Commands returns the shell commands a prompt quotes, in order: each
// fenced block (```…```, its language tag dropped) is one command, and so
// is each single-backtick span outside them (`like this`, on one line).
// Empty quotes and an unclosed quote count for nothing.
func Commands(text string) []string {
	var cmds []string
	for i := 0; i < len(text); {
		if strings.HasPrefix(text[i:], "```") {
			body, rest, ok := strings.Cut(text[i+3:], "```")
			if !ok {
				break
			}
			if cmd := fencedCommand(body); cmd != "" {
				cmds = append(cmds, cmd)
			}
			i = len(text) - len(rest)
			continue
		}
		if text[i] == '`' {
			end := strings.IndexAny(text[i+1:], "`\n")
			if end < 0 {
				break
			}
			if text[i+1+end] == '\n' {
				i += 1 + end // a span does not cross lines: this backtick opened nothing
				continue
			}
			if cmd := strings.TrimSpace(text[i+1 : i+1+end]); cmd != "" {
				cmds = append(cmds, cmd)
			}
			i += end + 2
			continue
		}
		i++
	}
	return cmds
}

// fencedCommand returns the command of a fenced block's body: its first
// line is a language tag when it is one word and more lines follow.
func fencedCommand(body string) string {
	if first, rest, ok := strings.Cut(body, "\n"); ok && strings.TrimSpace(rest) != "" {
		if tag := strings.TrimSpace(first); tag == "" || isTag(tag) {
			body = rest
		}
	}
	return strings.TrimSpace(body)
}

// isTag reports whether s looks like a fence's language tag (sh, bash,
// shell-session, console) rather than a command.
func isTag(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '+') {
			return false
		}
	}
	return true
}
