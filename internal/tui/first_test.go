package tui

import (
	"fmt"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

// turns returns the records of n turns, each a question and its answer,
// from seq 1 on.
func turns(n int) []protocol.TranscriptRecord {
	var rs []protocol.TranscriptRecord
	for i := 1; i <= n; i++ {
		turn := fmt.Sprintf("t%d", i)
		seq := uint64(len(rs))
		rs = append(rs,
			record(seq+1, protocol.RecordTurnStart, turn, protocol.TurnStartData{RunID: "run-" + turn}),
			record(seq+2, protocol.RecordUserMessage, turn, protocol.UserMessageData{Text: fmt.Sprintf("question %d", i)}),
			record(seq+3, protocol.RecordAssistantMessage, turn, protocol.MessageData{Role: "assistant", Parts: []protocol.MessagePart{{Type: protocol.PartText, Text: fmt.Sprintf("answer %d", i)}}}),
			record(seq+4, protocol.RecordTurnEnd, turn, protocol.TurnEndData{Status: protocol.TurnCompleted}),
		)
	}
	return rs
}

// firstScreen is a screen whose stream's snapshot is through record
// through, 100x30, given page as its first page.
func firstScreen(t *testing.T, through uint64, page client.TranscriptPage) *model {
	t.Helper()
	m := screenModel(t)
	m.through, m.noOlder = through, false
	m.firstPage(page, nil)
	return m
}

// TestTheFirstFrameDrawsTheNewestRecordsAndScrollingUpShowsTheOlder: a
// first page of more turns than a screen holds draws the newest that
// fit, the last reply above the input line; the older ones show, in
// order, as the person scrolls up, none lost and none twice.
func TestTheFirstFrameDrawsTheNewestRecordsAndScrollingUpShowsTheOlder(t *testing.T) {
	rs := turns(40)
	m := firstScreen(t, 160, client.TranscriptPage{Through: 160, Records: rs})
	if !m.started || m.afterFirst != nil {
		t.Fatalf("a full first page: started %t, a command after it %t", m.started, m.afterFirst != nil)
	}
	if m.hidden == 0 {
		t.Fatalf("every block of 40 turns is drawn for a screen of 30 lines")
	}
	s := m.screen()
	if i := strings.Index(s, "answer 40"); i < 0 || !strings.Contains(s[i:], "\n>") {
		t.Fatalf("the first frame:\n%s", s)
	}
	// Bubble Tea's first size, the one the screen was drawn at, leaves
	// the older blocks out still; another size draws them all.
	hidden := m.hidden
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	if m.hidden != hidden {
		t.Fatalf("the same size drew %d blocks more", hidden-m.hidden)
	}
	m.Update(tea.WindowSizeMsg{Width: 100, Height: 40})
	if s := m.screen(); m.hidden != 0 || !strings.Contains(s, "answer 40") {
		t.Fatalf("laid out for 40 rows, %d blocks left out:\n%s", m.hidden, s)
	}
	for range 200 {
		if strings.Contains(m.screen(), "question 1\n") {
			break
		}
		press(m, tea.KeyPgUp, 0, "")
	}
	if !strings.Contains(m.screen(), "question 1\n") || !m.view.AtTop() {
		t.Fatalf("scrolled up to the top:\n%s", m.screen())
	}
	all := ""
	for {
		all += m.screen() + "\n"
		if m.view.AtBottom() {
			break
		}
		press(m, tea.KeyPgDown, 0, "")
	}
	for i := 1; i <= 40; i++ {
		if n := strings.Count(all, fmt.Sprintf("question %d\n", i)); n == 0 {
			t.Errorf("turn %d is not shown scrolling down from the top", i)
		}
	}
	if m.hidden != 0 {
		t.Errorf("blocks still hidden once scrolled up: %d", m.hidden)
	}
}

// TestAFirstPageThatCannotJoinTheStreamIsReadAgain: a first page read
// through less than the stream's snapshot (records between would be
// missing) is left out, and the screen reads its own; its records after
// the snapshot are left to the stream, which brings them.
func TestAFirstPageThatCannotJoinTheStreamIsReadAgain(t *testing.T) {
	rs := turns(3)
	m := firstScreen(t, 12, client.TranscriptPage{Through: 8, Records: rs[:8]})
	if m.started || len(m.history) != 0 {
		t.Fatalf("a page through 8 of a snapshot through 12 was used: %d blocks", len(m.history))
	}

	m = firstScreen(t, 8, client.TranscriptPage{Through: 12, Records: rs})
	if !m.started {
		t.Fatal("a page through 12 of a snapshot through 8 was left out")
	}
	if s := m.screen(); !strings.Contains(s, "answer 2") || strings.Contains(s, "answer 3") {
		t.Fatalf("the page's records after the snapshot are drawn, or those before it are not:\n%s", s)
	}
	m.apply(entry(rs[8]), entry(rs[9]), entry(rs[10]), entry(rs[11]))
	if s := m.screen(); strings.Count(s, "answer 3") != 1 || strings.Count(s, "question 3") != 1 {
		t.Fatalf("the turn after the snapshot, brought by the stream:\n%s", s)
	}

	m = firstScreen(t, 4, client.TranscriptPage{Through: 12, Records: rs[8:]})
	if m.started {
		t.Fatal("a page starting after the snapshot was used: the stream brings its records")
	}
}

// TestALineWiderThanTheScreenIsCut: a line no wrapping breaks (a turn's
// rule with a long id) is cut at the screen's edge, the lines below it
// where they belong.
func TestALineWiderThanTheScreenIsCut(t *testing.T) {
	long := "t" + strings.Repeat("x", 150)
	rs := []protocol.TranscriptRecord{
		record(1, protocol.RecordTurnStart, long, protocol.TurnStartData{RunID: "run-1"}),
		record(2, protocol.RecordUserMessage, long, protocol.UserMessageData{Text: "a question"}),
		record(3, protocol.RecordAssistantMessage, long, protocol.MessageData{Role: "assistant", Parts: []protocol.MessagePart{{Type: protocol.PartText, Text: "an answer"}}}),
		record(4, protocol.RecordTurnEnd, long, protocol.TurnEndData{Status: protocol.TurnCompleted}),
	}
	m := firstScreen(t, 4, client.TranscriptPage{Through: 4, Records: rs})
	s := m.screen()
	if !strings.Contains(s, "── turn "+long[:80]) {
		t.Fatalf("the turn's rule is not drawn:\n%s", s)
	}
	for l := range strings.Lines(s) {
		if w := ansi.StringWidth(strings.TrimSuffix(l, "\n")); w > 100 {
			t.Fatalf("a line %d wide on a screen 100 wide:\n%s", w, s)
		}
	}
	if i := strings.Index(s, "a question"); i < 0 || !strings.Contains(s[i:], "an answer\n── completed") {
		t.Fatalf("the lines below the cut one:\n%s", s)
	}
}

// TestAFirstPagesBlocksMadeWhereItIsReadDrawTheSameFrame: the blocks
// ReadFirstPage makes of a page as it is read draw the frame the page's
// records draw; when the stream's snapshot leaves the page's newest
// records out, they are not used, and the frame has none of those.
func TestAFirstPagesBlocksMadeWhereItIsReadDrawTheSameFrame(t *testing.T) {
	rs := turns(40)
	page := client.TranscriptPage{Through: 160, Records: rs}
	want := firstScreen(t, 160, page).screen()

	m := screenModel(t)
	m.through, m.noOlder = 160, false
	m.firstPage(page, feedOf(rs))
	if got := m.screen(); got != want {
		t.Fatalf("the page's blocks made as it was read drew:\n%s\nits records:\n%s", got, want)
	}

	// The snapshot is through the 39th turn: the 40th is the stream's.
	m = screenModel(t)
	m.through, m.noOlder = 156, false
	m.firstPage(page, feedOf(rs))
	s := m.screen()
	if strings.Contains(s, "answer 40") || !strings.Contains(s, "answer 39") {
		t.Fatalf("a page read past the snapshot, its blocks made of all its records, drew:\n%s", s)
	}
}
