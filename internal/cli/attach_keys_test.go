package cli_test

import (
	"strings"
	"testing"
)

// inputLine returns the line of screen text that shows the prompt being
// typed, without the spaces after it.
func inputLine(text string) string {
	for l := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(l, "> ") {
			return strings.TrimRight(l, " ")
		}
	}
	return ""
}

// TestTheInputLineTakesReadlinesKeys: ctrl+w deletes a word, ctrl+a and
// ctrl+e go to the line's start and end, alt+b and alt+f a word back and
// forward, ctrl+k deletes to the end and ctrl+u to the start, as a shell's
// line does.
func TestTheInputLineTakesReadlinesKeys(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir()))
	s := p.screen(t, "attach", id)
	s.waitText("ctrl+\\ detach")
	steps := []struct{ keys, want string }{
		{"one two three", "> one two three"},
		{"\x17", "> one two"},                                       // ctrl+w
		{"\x01X", "> Xone two"},                                     // ctrl+a
		{"\x05Y", "> Xone two Y"},                                   // ctrl+e
		{"\x1bb\x1bbZ", "> Xone Ztwo Y"},                            // alt+b twice
		{"\x1bfW", "> Xone ZtwoW Y"},                                // alt+f
		{"\x01\x1bf\x0b", "> Xone"},                                 // ctrl+a, alt+f, ctrl+k
		{"\x15", "> a prompt: enter sends it, alt+enter queues it"}, // ctrl+u: the line empty
	}
	for _, st := range steps {
		s.typeKeys(st.keys)
		s.waitFor(st.want, func(text string) bool { return inputLine(text) == st.want })
	}
}

// TestTheScreenSaysATurnRunsAndLetsGoOfItsInterruptOnceItEnded: the
// header says running while a turn runs; "interrupting the turn" goes
// once the turn is interrupted; detaching says so, as tmux does.
func TestTheScreenSaysATurnRunsAndLetsGoOfItsInterruptOnceItEnded(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--cwd", p.workDir(), "--approve", "all"))
	s := p.screen(t, "attach", id)
	s.waitText("ctrl+\\ detach")
	s.typeLine("run `sleep 30`")
	s.waitText("● $ sleep 30")
	header := func(text string) string { line, _, _ := strings.Cut(text, "\n"); return line }
	if h := header(s.text()); !strings.HasSuffix(strings.TrimSpace(h), "running") {
		t.Errorf("the header while the turn runs: %q", h)
	}
	s.typeKeys("\x1b")
	s.waitFor("the turn interrupted, and the notice of it gone", func(text string) bool {
		return strings.Contains(text, "── interrupted") && !strings.Contains(text, "interrupting the turn") &&
			strings.HasSuffix(strings.TrimSpace(header(text)), "idle")
	})
	if strings.Contains(s.text(), "context canceled") {
		t.Errorf("the screen speaks Go:\n%s", s.text())
	}
	s.typeKeys("\x1c")
	if err := s.waitExit(); err != nil {
		t.Fatal(err)
	}
	if text := s.text(); !strings.Contains(text, "[detached (from session "+id+")]") {
		t.Fatalf("detaching said nothing:\n%s", text)
	}
}

// TestThePickerAlignsEmojiTitlesAndLeavesNothingBehind: a title with
// emoji takes the columns the terminal gives it, the columns after it
// where they are on every other line; once a session is chosen and left,
// the list is not on the terminal.
func TestThePickerAlignsEmojiTitlesAndLeavesNothingBehind(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	titles := []string{"plain words", "🚀 launch", "❤️ hearts ⚠️ warn", "👍🏽 thumbs"}
	for _, title := range titles {
		p.mustRun("new", "--cwd", dir, "--title", title)
	}
	s := p.screenOf(t, p.commandIn(dir, "attach"))
	// Drawn first at a width of its own, then at the terminal's.
	s.waitFor("every title whole", func(text string) bool {
		for _, title := range titles {
			if !strings.Contains(text, title) {
				return false
			}
		}
		return true
	})
	col := -1
	for _, title := range titles {
		// The column of the status after the title, in the terminal's
		// cells.
		at := s.cellOf(title, "idle")
		if at < 0 {
			t.Fatalf("no line of %q:\n%s", title, s.text())
		}
		if col >= 0 && at != col {
			t.Errorf("the status after %q is at column %d, not %d:\n%s", title, at, col, s.text())
		}
		col = at
	}
	s.typeKeys("\r")
	s.waitText("ctrl+\\ detach")
	s.typeKeys("\x1c")
	// Typed as soon as the session shows, before its screen reads keys
	// (the terminal not raw yet), ctrl+\ detaches all the same.
	if err := s.waitExit(); err != nil {
		t.Fatalf("%v:\n%s", err, s.text())
	}
	if text := s.text(); strings.Contains(text, "sessions of this directory") || !strings.Contains(text, "[detached (from session ") {
		t.Fatalf("after detaching:\n%s", text)
	}
}
