package tui

import (
	"regexp"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/agentd-dev/agentd/protocol"
)

// sgr is a style sequence, the only escape sequence Markdown may write.
var sgr = regexp.MustCompile("\x1b\\[[0-9;]*m")

// markdownScreen renders src at width and returns the text a terminal
// shows, failing t when the output holds anything a terminal would act on
// other than styles.
func markdownScreen(t *testing.T, src string, width int) string {
	t.Helper()
	out := Markdown(src, width)
	for _, r := range sgr.ReplaceAllString(out, "") {
		if r < 0x20 && r != '\n' || r == 0x7f || r >= 0x80 && r <= 0x9f {
			t.Fatalf("Markdown(%q) writes control character %U:\n%q", src, r, out)
		}
	}
	return ansi.Strip(out)
}

func TestMarkdownRendersBlocks(t *testing.T) {
	for _, c := range []struct {
		name, src string
		width     int
		want      string
	}{{
		name:  "heading and wrapped paragraph",
		src:   "# A title\n\nSome *emphasis*, **strong** text\nand `inline  code` wrapped to the width.",
		width: 24,
		want:  "A title\n\nSome emphasis, strong\ntext and inline  code\nwrapped to the width.",
	}, {
		name:  "hard break, escapes and entities",
		src:   "one\\\ntwo  \nthree \\*not emphasis\\* &amp; &lt;tag&gt;",
		width: 80,
		want:  "one\ntwo\nthree *not emphasis* & <tag>",
	}, {
		name:  "nested lists",
		src:   "- one\n- two\n  - two a\n  - two b\n    1. deep\n    2. deeper\n       - deepest\n- three",
		width: 80,
		want:  "• one\n• two\n  ◦ two a\n  ◦ two b\n    1. deep\n    2. deeper\n       ▪ deepest\n• three",
	}, {
		name:  "loose numbered list with a wrapped item",
		src:   "9. first item\n\n10. a second item that wraps",
		width: 16,
		want:  "9.  first item\n\n10. a second\n    item that\n    wraps",
	}, {
		name:  "code blocks, fenced and indented, as written",
		src:   "Run:\n\n```go\nfunc main() {\n\tprintln(\"*hi*\")\n}\n```\n\n    indented  code\n\nafter",
		width: 80,
		want:  "Run:\n\n  func main() {\n      println(\"*hi*\")\n  }\n\n  indented  code\n\nafter",
	}, {
		name:  "long code lines broken, not lost",
		src:   "```\nabcdefghij\n```",
		width: 6,
		want:  "  abcd\n  efgh\n  ij",
	}, {
		name:  "block quote",
		src:   "> quoted *text*\n> goes on\n>\n> - a list",
		width: 80,
		want:  "│ quoted text goes on\n│\n│ • a list",
	}, {
		name:  "links and rule",
		src:   "See [the docs](https://example.com/docs) or <https://example.com>.\n\n---\n\n![a chart](chart.png)",
		width: 20,
		want:  "See the docs\n(https://example.com\n/docs) or\nhttps://example.com.\n\n────────────────────\n\n[image: a chart]\n(chart.png)",
	}, {
		name:  "table",
		src:   "Results:\n| name | count | share |\n|:-----|------:|:-----:|\n| alpha | 3 | 10% |\n| b \\| c | `12` |\n",
		width: 80,
		want: "Results:\n\n" +
			"name  │ count │ share\n" +
			"──────┼───────┼──────\n" +
			"alpha │     3 │  10%\n" +
			"b | c │    12 │",
	}, {
		name:  "table in a tight list",
		src:   "- one\n- two\n  | a | b |\n  |---|---|\n  | 1 | 2 |\n- three",
		width: 80,
		want:  "• one\n• two\n\n  a │ b\n  ──┼──\n  1 │ 2\n• three",
	}, {
		name:  "table narrowed to the width",
		src:   "| key | value |\n|---|---|\n| a | one two three four |",
		width: 16,
		want:  "key │ value\n────┼───────────\na   │ one two\n    │ three four",
	}, {
		name:  "long words and wide characters broken at the width",
		src:   "abcdefghijkl 日本語です",
		width: 5,
		want:  "abcde\nfghij\nkl\n日本\n語で\nす",
	}} {
		t.Run(c.name, func(t *testing.T) {
			if got := markdownScreen(t, c.src, c.width); got != c.want {
				t.Errorf("Markdown(%q, %d):\n%s\nwant:\n%s\n(%q)", c.src, c.width, got, c.want, got)
			}
		})
	}
}

// TestMarkdownMakesControlSequencesVisible: escapes in a reply, written
// as they are or as character references, inside code and emphasis, reach
// the screen as text.
func TestMarkdownMakesControlSequencesVisible(t *testing.T) {
	for _, c := range []struct{ name, src, want string }{
		{"code block", "```\nprintf '\x1b]0;title\x07'\x1b[2J\n```", "  printf '^[]0;title^G'^[[2J"},
		{"indented code", "    \x1b[31mred", "  ^[[31mred"},
		{"emphasis", "*\x1b[31mred* and **\x1b[2Jclear**", "^[[31mred and ^[[2Jclear"},
		{"inline code", "`\x1b[H`", "^[[H"},
		{"character references", "_&#27;[2J_ and &#x9b;1m", "^[[2J and ^[[1m"},
		{"C1 and DEL", "**\u009b2J\x7f**", "^[[2J^?"},
		{"link", "[bell\x07](http://e/\x1b[1m)", "bell^G (http://e/^[[1m)"},
		{"table", "| a |\n|---|\n| *\x1b[2J* |", "a\n─────\n^[[2J"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := markdownScreen(t, c.src, 80); got != c.want {
				t.Errorf("Markdown(%q):\n%s\nwant:\n%s", c.src, got, c.want)
			}
		})
	}
}

func TestMarkdownStylesSpans(t *testing.T) {
	out := Markdown("plain **bold** *italic* `code`", 80)
	for _, want := range []string{"plain ", "\x1b[1mbold\x1b[m", "\x1b[3mitalic\x1b[m", "code\x1b[m"} {
		if !strings.Contains(out, want) {
			t.Errorf("%q lacks %q", out, want)
		}
	}
	// Each line is styled on its own, so a line shown alone keeps its style.
	for _, l := range strings.Split(Markdown("**one two three four**", 8), "\n") {
		if !strings.HasPrefix(l, "\x1b[1m") || !strings.HasSuffix(l, "\x1b[m") {
			t.Errorf("line %q is not styled on its own", l)
		}
	}
}

func BenchmarkMarkdown(b *testing.B) {
	var reply strings.Builder
	for range 8 {
		reply.WriteString("## Step\n\nThis changes `parse` so that **every** caller sees *one* answer; see [the issue](https://example.com/i/1).\n\n- first point\n- second point\n  1. nested\n\n```go\nfunc parse(s string) (int, error) {\n\treturn strconv.Atoi(s)\n}\n```\n\n| name | value |\n|---|---:|\n| a | 1 |\n\n")
	}
	src := reply.String()
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		Markdown(src, 100)
	}
}

// TestAFinishedReplyShowsAsMarkdown on the screen; one still streaming
// shows as written.
func TestAFinishedReplyShowsAsMarkdown(t *testing.T) {
	m := screenModel(t)
	m.apply(
		protocol.SessionDelta{Event: protocol.EventMessageStart, TurnID: "t1", MessageID: "m1", Role: "assistant"},
		protocol.SessionDelta{Event: protocol.EventMessageUpdate, TurnID: "t1", MessageID: "m1", Text: "## Plan\n\n- **build** `\x1b[2J`\n"},
	)
	if s := m.screen(); !strings.Contains(s, "- **build** `^[[2J`") {
		t.Fatalf("a streaming reply:\n%s", s)
	}
	m.apply(protocol.SessionDelta{Event: protocol.EventMessageEnd, TurnID: "t1", MessageID: "m1"})
	s := trimLines(m.screen())
	if !strings.Contains(s, "\nPlan\n\n• build ^[[2J\n") || strings.Contains(s, "**") {
		t.Fatalf("a finished reply:\n%s", s)
	}
	m.Update(tea.WindowSizeMsg{Width: 12, Height: 30})
	if s := trimLines(m.screen()); !strings.Contains(s, "\n• build\n  ^[[2J\n") {
		t.Fatalf("a finished reply on a narrower screen:\n%s", s)
	}
}

// trimLines drops the spaces at the ends of the lines of s.
func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// TestCellsMeasuresAsStringWidthDoes: the quick count of a line's cells
// agrees with ansi.StringWidth on plain, styled and wide text, and on
// sequences it leaves to it.
func TestCellsMeasuresAsStringWidthDoes(t *testing.T) {
	for _, s := range []string{
		"",
		"plain text, with `code` and 42 digits",
		"\x1b[1mbold\x1b[m and \x1b[38;5;244mdim\x1b[m",
		"\x1b[?25l\x1b[Hhidden cursor",
		"wide: 漢字 and é, a flag 🇫🇷",
		"\x1b[1m漢字\x1b[m",
		"\x1b]8;;https://example.com\x07link\x1b]8;;\x07",
		"cut short \x1b[38;5",
		"tab\there",
		"\x1b",
	} {
		if got, want := cells(s), ansi.StringWidth(s); got != want {
			t.Errorf("cells(%q) = %d, ansi.StringWidth %d", s, got, want)
		}
	}
}
