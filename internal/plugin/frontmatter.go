package plugin

import (
	"errors"
	"fmt"
	"strings"
)

// FrontMatter is a Markdown file split into its front matter and body.
type FrontMatter struct {
	// Present is set when the file starts with a front matter block.
	Present bool
	// Fields are the block's scalar fields, by key. A field whose value
	// is a YAML list or mapping (allowed-tools as a list, say) is kept
	// as its text, joined by spaces.
	Fields map[string]string
	// Body is what follows the block: the whole file when there is none.
	Body string
}

// maxFrontMatterKeys bounds the keys of one block.
const maxFrontMatterKeys = 64

// ParseFrontMatter splits a command's or a skill's file into its front
// matter and body. The front matter is the YAML subset such files use: a
// block between a first line "---" and the next "---", of "key: value"
// lines; a value may be quoted ('...' or "..."), or be folded onto the
// indented lines that follow it (after "key: >", "key: |" or nothing).
// Comment lines (#) and blank lines are skipped. A block never closed, a
// line that is not "key: value", or a key given twice is an *Error (with
// no Path) naming the line.
func ParseFrontMatter(b []byte) (FrontMatter, error) {
	text := strings.ReplaceAll(string(b), "\r\n", "\n")
	fm := FrontMatter{Fields: map[string]string{}, Body: text}
	rest, ok := strings.CutPrefix(text, "---\n")
	if !ok {
		if text == "---" {
			return fm, &Error{Err: errors.New("front matter opened with --- on line 1 is never closed")}
		}
		return fm, nil
	}
	fm.Present = true
	var block string
	if strings.HasPrefix(rest, "---\n") || rest == "---" {
		block, fm.Body = "", strings.TrimPrefix(strings.TrimPrefix(rest, "---"), "\n")
	} else {
		i := strings.Index(rest, "\n---\n")
		switch {
		case i >= 0:
			block, fm.Body = rest[:i], rest[i+len("\n---\n"):]
		case strings.HasSuffix(rest, "\n---"):
			block, fm.Body = strings.TrimSuffix(rest, "\n---"), ""
		default:
			return fm, &Error{Err: errors.New("front matter opened with --- on line 1 is never closed")}
		}
	}
	key := "" // the key whose value goes on over indented lines
	for n, line := range strings.Split(block, "\n") {
		lineNo := n + 2
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' || strings.HasPrefix(trimmed, "- ") || trimmed == "-" {
			if key == "" {
				return fm, &Error{Err: fmt.Errorf("front matter line %d: an indented line follows no key", lineNo)}
			}
			fm.Fields[key] = strings.TrimSpace(fm.Fields[key] + " " + unquote(strings.TrimPrefix(trimmed, "- ")))
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t\"'") {
			return fm, &Error{Err: fmt.Errorf("front matter line %d: want \"key: value\", got %q", lineNo, clip(line))}
		}
		if _, dup := fm.Fields[k]; dup {
			return fm, &Error{Field: k, Err: fmt.Errorf("front matter line %d: the key is given twice", lineNo)}
		}
		if len(fm.Fields) == maxFrontMatterKeys {
			return fm, &Error{Err: fmt.Errorf("front matter has more than %d keys", maxFrontMatterKeys)}
		}
		v = strings.TrimSpace(v)
		switch v {
		case ">", "|", ">-", "|-", ">+", "|+":
			v = ""
		}
		fm.Fields[k] = unquote(v)
		key = k
	}
	return fm, nil
}

// unquote removes the quotes of a quoted YAML scalar.
func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
		inner := v[1 : len(v)-1]
		if v[0] == '\'' {
			return strings.ReplaceAll(inner, "''", "'")
		}
		return strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\n`, "\n", `\t`, "\t").Replace(inner)
	}
	return v
}

// clip shortens a line quoted in an error.
func clip(s string) string {
	const limit = 60
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && s[cut]&0xc0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
