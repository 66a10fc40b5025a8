package tui

import (
	"math/rand/v2"
	"strings"
	"testing"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// textPieces are what the screen's text is made of: words of ASCII, the
// symbols it marks things with, spaces, tabs and line breaks, styles'
// sequences, and characters measured otherwise (wide, combining,
// emoji, a variation selector after a symbol).
var textPieces = []string{
	"a", "word", "question", "ls -la", "`code`", "1234567890", "!?.,;:()[]{}<>\"'",
	" ", "  ", "\t", "\n", "\r\n", "\n\n",
	"─", "│", "❯", "·", "…", "●", "→", "── turn", "❯ ",
	"\x1b[1m", "\x1b[90m", "\x1b[m", "\x1b[1;94m", "\x1b[38;5;12m",
	"é", "e\u0301", "日本語", "한국", "👍", "👩\u200d💻", "·\u0301", "❯\ufe0f", "\u00ad", "ｗｉｄｅ",
}

// randomText joins up to n pieces of textPieces.
func randomText(r *rand.Rand, n int) string {
	var b strings.Builder
	for range r.IntN(n + 1) {
		b.WriteString(textPieces[r.IntN(len(textPieces))])
	}
	return b.String()
}

func TestCellsMeasuresAsAnsiStringWidth(t *testing.T) {
	for _, sym := range narrowSymbols {
		if w := ansi.StringWidth(string(sym)); w != 1 {
			t.Errorf("%q is %d cells wide, not one", sym, w)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		s := randomText(r, 12)
		if strings.ContainsAny(s, "\t\r\n") {
			continue // a line's width
		}
		if got, want := cells(s), ansi.StringWidth(s); got != want {
			t.Fatalf("cells(%q) = %d, ansi.StringWidth %d", s, got, want)
		}
	}
}

func TestPaintDrawsAsLipgloss(t *testing.T) {
	st := styles()
	paints := map[string]paint{
		"dim": st.dim, "header": st.header, "user": st.user, "tool": st.tool, "toolOK": st.toolOK,
		"err": st.err, "ask": st.ask, "running": st.running,
	}
	for name, p := range paints {
		if p.on == "" {
			t.Fatalf("style %s is drawn by lipgloss, not as a paint", name)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		s := randomText(r, 16)
		for name, p := range paints {
			if got, want := p.Render(s), p.Style.Render(s); got != want {
				t.Fatalf("%s.Render(%q):\n got %q\nwant %q", name, s, got, want)
			}
		}
	}
	// A style with more than colours and weight is drawn by lipgloss.
	wide := newPaint(lipgloss.NewStyle().Foreground(lipgloss.Color("8")).Width(10))
	if wide.on != "" || wide.Render("a") != wide.Style.Render("a") {
		t.Fatalf("a style with a width drawn as a paint: %q", wide.Render("a"))
	}
}

func TestWrapToWrapsAsLipgloss(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 20000 {
		s := randomText(r, 40)
		width := r.IntN(40) - 2
		if got, want := wrapTo(s, width), lipgloss.NewStyle().Width(max(width, 1)).Render(s); got != want {
			t.Fatalf("wrapTo(%q, %d):\n got %q\nwant %q", s, width, got, want)
		}
	}
}

func FuzzPaintDrawsAsLipgloss(f *testing.F) {
	f.Add("❯ question 7: what does the code\tdo?\n── done", 20)
	f.Add("\x1b[36mls -la\x1b[m, and · … ●", 7)
	f.Fuzz(func(t *testing.T, s string, width int) {
		width %= 200
		p := styles().user
		if got, want := p.Render(s), p.Style.Render(s); got != want {
			t.Fatalf("Render(%q):\n got %q\nwant %q", s, got, want)
		}
		if got, want := wrapTo(s, width), lipgloss.NewStyle().Width(max(width, 1)).Render(s); got != want {
			t.Fatalf("wrapTo(%q, %d):\n got %q\nwant %q", s, width, got, want)
		}
		if !strings.ContainsAny(s, "\t\r\n") {
			if got, want := cells(s), ansi.StringWidth(s); got != want {
				t.Fatalf("cells(%q) = %d, ansi.StringWidth %d", s, got, want)
			}
		}
	})
}
