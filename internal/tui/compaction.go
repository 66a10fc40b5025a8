package tui

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentd-dev/agentd/protocol"
)

// The records and deltas of long sessions, as notes: a compaction (where
// it happened, and the summary the model is sent from then on), a file a
// tool changed, and where a fork's or a rewind's branch begins.

// compactionDelta shows a compaction as it happens: a note when it starts,
// replaced by its record when it is done, or by why it failed.
func (f *Feed) compactionDelta(d protocol.SessionDelta) {
	c := d.Compaction
	if c == nil {
		return
	}
	switch c.State {
	case protocol.CompactionStarted:
		f.compacting = f.add(&Block{Kind: BlockNote, TurnID: d.TurnID, Text: fmt.Sprintf(
			"compacting the context (%s): about %s tokens of a %s-token window…", c.Trigger, thousands(c.TokensBefore), thousands(c.ContextWindow))})
	case protocol.CompactionFailed:
		text := "compaction failed; the session is as it was: " + c.Error
		if b := f.compacting; b != nil && !b.Done {
			f.compacting = nil
			b.Text, b.Error, b.Done = text, true, true
			f.changed(Change{Block: b, Replaced: true, Done: true})
			return
		}
		f.add(&Block{Kind: BlockNote, TurnID: d.TurnID, Text: text, Error: true, Done: true})
	}
}

// compactionRecord shows a compaction record where it stands in the
// transcript.
func (f *Feed) compactionRecord(r protocol.TranscriptRecord) {
	var d protocol.CompactionData
	json.Unmarshal(r.Data, &d)
	text := CompactionNote(d)
	if b := f.compacting; b != nil && !b.Done {
		f.compacting = nil
		b.Text, b.Seq, b.Time, b.Done = text, r.Seq, r.Time, true
		f.changed(Change{Block: b, Replaced: true, Done: true})
		return
	}
	f.add(&Block{Kind: BlockNote, TurnID: r.TurnID, Seq: r.Seq, Time: r.Time, Text: text, Done: true})
}

// CompactionNote describes a compaction record.
func CompactionNote(d protocol.CompactionData) string {
	how := "asked for"
	if d.Trigger == protocol.CompactionAuto {
		how = "automatic"
	}
	return fmt.Sprintf("── context compacted here (%s): %d earlier messages summarized, %d kept; about %s → %s tokens of a %s-token window. The model is sent from now on:\n%s",
		how, d.Messages, d.Kept, thousands(d.TokensBefore), thousands(d.TokensAfter), thousands(d.ContextWindow), strings.TrimSpace(d.Summary))
}

// fileChangeNote describes a file_change record.
func fileChangeNote(r protocol.TranscriptRecord) string {
	var d protocol.FileChangeData
	json.Unmarshal(r.Data, &d)
	if !d.Existed {
		return fmt.Sprintf("%s created %s", d.Tool, d.Path)
	}
	return fmt.Sprintf("%s changed %s", d.Tool, d.Path)
}

// forkedNote describes a forked record.
func forkedNote(r protocol.TranscriptRecord) string {
	var d protocol.ForkedData
	json.Unmarshal(r.Data, &d)
	if d.RewoundTurnID != "" {
		s := fmt.Sprintf("── rewound from session %s to before turn %s", d.FromSessionID, d.RewoundTurnID)
		if n := len(d.Restored) + len(d.Removed); n > 0 {
			s += fmt.Sprintf("; %d files put back as they were", n)
		}
		return s
	}
	return fmt.Sprintf("── forked from session %s at record %d", d.FromSessionID, d.AtSequence)
}
