package resource

import (
	"fmt"
	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"slices"
	"strings"
	"testing"
	"time"
)

// feed gives s output and has its model take it in.
func feed(s *screen, out string) {
	s.add([]byte(out), 0)
	s.mu.Lock()
	s.catchUpLocked()
	s.mu.Unlock()
}

func asleep(s *screen) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.emu == nil
}

func sameDrawing(t *testing.T, when string, got, want *screen) {
	t.Helper()
	gl, gc, _ := got.draw()
	wl, wc, _ := want.draw()
	if !slices.Equal(gl, wl) || gc != wc {
		t.Fatalf("%s: drawn\n%q cursor %q\nwant\n%q cursor %q", when, gl, gc, wl, wc)
	}
	if g, w := got.text(), want.text(); g != w {
		t.Fatalf("%s: text %q, want %q", when, g, w)
	}
}

// A screen that slept draws, and goes on drawing after more output, as
// one that never slept: its lines, styles, cursor and the modes its
// program changed are kept.
func TestASleepingScreenDrawsAsOneThatNeverSlept(t *testing.T) {
	slept, awake := newScreen(20, 6, time.Hour, nil), newScreen(20, 6, time.Hour, nil)
	before := "\x1b[1;31mred\x1b[0m plain\r\n\x1b[44mblue ground\x1b[0m\r\n" +
		"\x1b[?7l" + // no autowrap: a long line stays on its row
		"\x1b[?25l" + // the cursor hidden
		"prompt> "
	feed(slept, before)
	feed(awake, before)
	slept.sleep(false)
	if !asleep(slept) {
		t.Fatal("a screen on the main screen with nothing pending did not sleep")
	}
	sameDrawing(t, "asleep", slept, awake)

	after := "typed a line much longer than twenty columns\r\nnext"
	feed(slept, after)
	feed(awake, after)
	if asleep(slept) {
		t.Fatal("output did not wake the screen")
	}
	sameDrawing(t, "woken", slept, awake)
	slept.mu.Lock()
	hidden := slept.emu.CursorHidden()
	slept.mu.Unlock()
	if !hidden {
		t.Fatal("the cursor the program hid shows again after the screen woke")
	}
}

// A full-screen program's state is more than its drawing: a screen on the
// alternate screen stays awake while its PTY may print more, and sleeps
// for good once its output has ended.
func TestAScreenOnTheAlternateScreenSleepsOnlyOnceItsOutputEnded(t *testing.T) {
	s := newScreen(20, 6, time.Hour, nil)
	feed(s, "shell$ vim\r\n\x1b[?1049h\x1b[2;3r\x1b[Hfull screen")
	s.sleep(false)
	if asleep(s) {
		t.Fatal("a screen on the alternate screen slept while its PTY runs")
	}
	s.sleep(true)
	if !asleep(s) {
		t.Fatal("a screen whose output ended stayed awake")
	}
	if text := s.text(); !strings.HasPrefix(text, "full screen") {
		t.Fatalf("the ended screen's text %q, want the alternate screen's", text)
	}
}

// An idle PTY's screen sleeps; what it prints next wakes it, and a client
// is drawn the screen as it is, across the sleep.
func TestAnIdlePTYsScreenSleepsAndWakesWithItsOutput(t *testing.T) {
	m, s, _ := newManager(t, func(c *Config) { c.ScreenSleep = 10 * time.Millisecond })
	r := start(t, m, StartInput{LaunchID: "l", Command: `printf 'name? '; read name; printf 'hello %s' "$name"; read _`, PTY: true, Cols: 30, Rows: 5})
	s.printed(t, r.Ref, "name? ")
	m.mu.Lock()
	sc := m.byRef[r.Ref].screen
	m.mu.Unlock()
	poll.Until(t, "the idle screen to sleep", func() bool { return asleep(sc) })
	if text, err := m.ScreenText(r.Ref); err != nil || !strings.Contains(text, "name?") {
		t.Fatalf("the sleeping screen's text %q, %v", text, err)
	}
	if err := m.Write(r.Ref, []byte("ada\r")); err != nil {
		t.Fatal(err)
	}
	s.printed(t, r.Ref, "hello ada")
	var drawn string
	if err := m.Screen(r.Ref, func(screen string, _ uint64) { drawn = screen }); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(drawn, "name? ada") || !strings.Contains(drawn, "hello ada") {
		t.Fatalf("the screen drawn after the PTY woke it: %q", drawn)
	}
	poll.Until(t, "the screen to sleep again", func() bool { return asleep(sc) })
}

func TestTailStartKeepsWholeLinesThatFitTheScreen(t *testing.T) {
	for _, c := range []struct {
		p         string
		max, rows int
		want      string
	}{
		{"short", 10, 3, "short"},          // all of it fits
		{"a\nb\nc\nd\ne", 100, 2, "d\ne"},  // two rows: the last two lines
		{"a\nb\nc\nd\n", 100, 2, "d\n"},    // a line ended: it and the empty one after
		{"aaaa\nbbbb\ncccc", 7, 5, "cccc"}, // bytes bound first, from a line start
		{"xxxxxxxxxx", 4, 5, "xxxx"},       // no line start: the last bytes
		{"a\nbbbbbbbbbb", 4, 5, "bbbb"},    // none in the window either
		{"\n\n\n", 2, 1, ""},               // one row of empty lines
	} {
		if got := c.p[tailStart([]byte(c.p), c.max, c.rows):]; got != c.want {
			t.Errorf("tailStart(%q, %d, %d) keeps %q, want %q", c.p, c.max, c.rows, got, c.want)
		}
	}
}

// A screen flooded faster than its model takes output in skips to the
// latest, and shows the same last lines as one fed everything.
func TestAFloodedScreenShowsItsLastLines(t *testing.T) {
	flooded, fed := newScreen(40, 5, time.Hour, nil), newScreen(40, 5, time.Hour, nil)
	var out strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&out, "line %d of the flood\r\n", i)
	}
	out.WriteString("$ ")
	flooded.add([]byte(out.String()), 1) // more than it keeps when behind
	feed(fed, out.String())
	flooded.pmu.Lock()
	skipped, kept := flooded.skipped, len(flooded.pending)
	flooded.pmu.Unlock()
	if !skipped || kept > 6*len("line 19999 of the flood\r\n") {
		t.Fatalf("kept %d bytes, skipped %v: want only the lines a screen shows", kept, skipped)
	}
	sameDrawing(t, "flooded", flooded, fed)
}

// A screen drawn again with nothing printed since is the drawing kept
// from before; after more output, a resize or a sleep it is drawn anew:
// each time as a screen given the same and drawn only then.
func TestAScreenDrawnAgainShowsWhatChangedSince(t *testing.T) {
	steps := []struct {
		name string
		do   func(*screen)
	}{
		{"output", func(s *screen) { feed(s, "first\r\n") }},
		{"nothing", func(*screen) {}},
		{"more output", func(s *screen) { feed(s, "\x1b[1msecond\x1b[0m\r\n") }},
		{"a resize", func(s *screen) { s.resize(30, 4) }},
		{"a sleep and more output", func(s *screen) { s.sleep(false); feed(s, "third") }},
	}
	s := newScreen(20, 6, time.Hour, nil)
	for i, step := range steps {
		step.do(s)
		s.draw()
		fresh := newScreen(20, 6, time.Hour, nil)
		for _, prev := range steps[:i+1] {
			prev.do(fresh)
		}
		sameDrawing(t, "after "+step.name, s, fresh)
	}
}
