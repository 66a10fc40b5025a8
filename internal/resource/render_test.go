package resource

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/charmbracelet/x/vt"
)

// rendered is what renderLines must give: Render's lines, each trimmed.
func rendered(emu *vt.Emulator) []string {
	lines := strings.Split(emu.Render(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return lines
}

func sameLines(t *testing.T, emu *vt.Emulator, input string) {
	t.Helper()
	got, want := renderLines(emu), rendered(emu)
	if len(got) != len(want) {
		t.Fatalf("%d lines drawn, Render draws %d, of %q", len(got), len(want), input)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("line %d drawn %q, Render draws %q, of %q", i+1, got[i], want[i], input)
		}
	}
}

// styledOutput is output a program might print: text, wide and combining
// characters, spaces, colours of every kind, attributes, underline
// styles and colours, hyperlinks, resets, erasures and cursor moves.
func styledOutput(r *rand.Rand, n int) string {
	pieces := []func() string{
		func() string { return "plain text " },
		func() string { return "   " },
		func() string { return "漢字" },
		func() string { return "e\u0301" },
		func() string { return "😀" },
		func() string { return "\r\n" },
		func() string { return "\x1b[0m" },
		func() string { return "\x1b[m " },
		func() string { return fmt.Sprintf("\x1b[%dm", 1+r.IntN(9)) },
		func() string { return fmt.Sprintf("\x1b[%dm", 30+r.IntN(8)) },
		func() string { return fmt.Sprintf("\x1b[%dm", 90+r.IntN(8)) },
		func() string { return fmt.Sprintf("\x1b[48;5;%dm", r.IntN(256)) },
		func() string { return fmt.Sprintf("\x1b[38;2;%d;%d;%dm", r.IntN(256), r.IntN(256), r.IntN(256)) },
		func() string { return fmt.Sprintf("\x1b[4:%dm", r.IntN(6)) },
		func() string { return fmt.Sprintf("\x1b[58;5;%dm", r.IntN(256)) },
		func() string { return "\x1b[7m \x1b[27m" },
		func() string { return "\x1b[39;49m" },
		func() string { return "\x1b]8;;https://example.com/a\x1b\\link\x1b]8;;\x1b\\" },
		func() string { return "\x1b]8;id=x;https://example.com/b\x1b\\" },
		func() string { return "\x1b]8;;\x1b\\" },
		func() string { return "\x1b[K" },
		func() string { return fmt.Sprintf("\x1b[%d;%dH", 1+r.IntN(12), 1+r.IntN(40)) },
		func() string { return fmt.Sprintf("\x1b[%dX", 1+r.IntN(5)) },
		func() string { return "\x1b[2J" },
	}
	var b strings.Builder
	for range n {
		b.WriteString(pieces[r.IntN(len(pieces))]())
	}
	return b.String()
}

// A screen is drawn byte for byte as the emulator's own Render draws it,
// whatever styles, links and characters its cells hold.
func TestAScreensLinesAreDrawnAsRenderDrawsThem(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		cols, rows := 1+r.IntN(50), 1+r.IntN(12)
		emu := vt.NewEmulator(cols, rows)
		emu.InputPipe().(interface{ Close() error }).Close()
		out := styledOutput(r, r.IntN(60))
		emu.WriteString(out)
		sameLines(t, emu, out)
	}
}

// FuzzRenderLines draws the screen of any output as Render does.
func FuzzRenderLines(f *testing.F) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		f.Add(styledOutput(r, 30))
	}
	f.Fuzz(func(t *testing.T, out string) {
		emu := vt.NewEmulator(30, 8)
		emu.InputPipe().(interface{ Close() error }).Close()
		emu.WriteString(out)
		sameLines(t, emu, out)
	})
}
