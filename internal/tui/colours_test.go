package tui

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/charmbracelet/colorprofile"
	"github.com/creack/pty"
)

// TestColoursOfA256ColourTerminalAskNothingMore: the screen draws the
// 256 colours of ANSI at most, so a terminal whose environment says 256
// colours has that profile without tmux (a process) or its terminfo
// asked; one whose environment says fewer is asked further, tmux
// included. A tmux of the test's own, first on PATH, records any call
// and says it has true colour.
func TestColoursOfA256ColourTerminalAskNothingMore(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	script := "#!/bin/sh\necho \"$@\" >> " + calls + "\necho ' 197: RGB: [missing]'\necho ' 220: Tc: (flag) true'\n"
	if err := os.WriteFile(filepath.Join(dir, "tmux"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(filepath.ListSeparator)+os.Getenv("PATH"))
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()
	inTmux := func(term string) []string {
		return []string{"TERM=" + term, "TMUX=" + filepath.Join(dir, "server") + ",1,0", "TERMINFO=" + dir}
	}

	if p := DetectColours(tty, inTmux("tmux-256color")).Profile(); p != colorprofile.ANSI256 {
		t.Fatalf("a 256-colour terminal in tmux: profile %v, want %v", p, colorprofile.ANSI256)
	}
	if b, err := os.ReadFile(calls); err == nil {
		t.Fatalf("the colours of a 256-colour terminal asked tmux: %q", b)
	}
	// Fewer colours said: tmux is asked, and its true colour found.
	if p := DetectColours(tty, inTmux("xterm")).Profile(); p != colorprofile.TrueColor {
		t.Fatalf("a terminal of 16 colours said, in a tmux of true colour: profile %v, want %v", p, colorprofile.TrueColor)
	}
	if _, err := os.ReadFile(calls); err != nil {
		t.Fatalf("the colours of a terminal of 16 colours said did not ask tmux: %v", err)
	}
	// Not a terminal: detected as before, whatever the environment says.
	f, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if p := DetectColours(f, []string{"TERM=xterm-256color"}).Profile(); p != colorprofile.Detect(f, []string{"TERM=xterm-256color"}) {
		t.Fatalf("a file: profile %v, not what colorprofile detects", p)
	}
}
