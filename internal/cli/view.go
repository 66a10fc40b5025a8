package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/tui"
	"github.com/agentd-dev/agentd/protocol"
)

// lineView turns the events of a session's streams, as a Follower opens
// them one after another, into the deltas that show the session once: a
// stream's opening projection restores what the stream before left
// unshown (replies streaming, tool calls running with their output so
// far, approvals pending) once the transcript records it includes are
// applied; an update after bytes were skipped says how many; and the end
// of a reply or a tool call, which brings its whole text, adds only what
// was not shown. agentd run, log -f and attach off a terminal show a
// session through one; it is not safe for concurrent use.
type lineView struct {
	// emit is given each delta to show, in order: an entry_added delta
	// for each transcript record.
	emit func(protocol.SessionDelta)
	// note is given a line to show beside them.
	note func(string)

	// restore is the projection of the stream opened last, restored once
	// the records it includes are applied; nil once it is.
	restore *protocol.SessionProjection
	open    map[string]*shown // by replyKey or toolKey: the replies and tool outputs not ended
	started int               // how many streams open has held: their order
	pending map[string]bool   // the interactions shown pending, by id
}

// shown is what a lineView has emitted of one reply's text or one tool
// call's output.
type shown struct {
	turnID, id string
	order      int // when it started among the streams
	text       strings.Builder
	// gapAt is where, in text, the last skipped bytes were left out; -1
	// when none were.
	gapAt int
}

// newLineView returns a lineView that shows a session through emit and
// note.
func newLineView(emit func(protocol.SessionDelta), note func(string)) *lineView {
	return &lineView{emit: emit, note: note, open: map[string]*shown{}, pending: map[string]bool{}}
}

// replyKey and toolKey are the keys of a reply and a tool call in
// lineView.open.
func replyKey(id string) string { return "m" + id }
func toolKey(id string) string  { return "t" + id }

// opened notes the projection a stream opened with; last is the last
// transcript record the follower had returned then.
func (v *lineView) opened(snap protocol.SessionProjection, last uint64) {
	v.restore = &snap
	if last >= snap.TranscriptSequence {
		v.restoreNow()
	}
}

// event shows one event of the stream opened last.
func (v *lineView) event(ev client.SessionEvent) {
	switch {
	case ev.Snapshot != nil:
		v.opened(*ev.Snapshot, ev.Snapshot.TranscriptSequence)
	case ev.Record != nil:
		v.record(*ev.Record, ev.Delta.Entry)
		if v.restore != nil && ev.Record.Seq >= v.restore.TranscriptSequence {
			v.restoreNow()
		}
	case ev.Delta.Event != "":
		if v.restore != nil {
			v.restoreNow() // the records it includes came first
		}
		v.delta(ev.Delta)
	}
}

// record shows a transcript record, whose line is entry (nil to encode
// it): a reply or a tool call it ends adds what was not shown of it.
func (v *lineView) record(r protocol.TranscriptRecord, entry json.RawMessage) {
	switch r.Type {
	case protocol.RecordAssistantMessage:
		var m protocol.MessageData
		json.Unmarshal(r.Data, &m)
		text := m.Text()
		if s := v.firstReply(r.TurnID); s != nil {
			v.endReply(s, text)
		}
	case protocol.RecordToolResults:
		var m protocol.MessageData
		json.Unmarshal(r.Data, &m)
		for _, p := range m.Parts {
			if res := p.ToolResult; res != nil {
				if s := v.open[toolKey(res.CallID)]; s != nil {
					v.endTool(s, res.Content, res.IsError)
				}
			}
		}
	}
	if entry == nil {
		entry, _ = json.Marshal(r)
	}
	v.emit(protocol.SessionDelta{Event: protocol.EventEntryAdded, TurnID: r.TurnID, Entry: entry})
}

// firstReply returns the reply of turnID that started first of those not
// ended: the one a record of the turn's next reply ends.
func (v *lineView) firstReply(turnID string) *shown {
	var first *shown
	for key, s := range v.open {
		if key[0] == 'm' && s.turnID == turnID && (first == nil || s.order < first.order) {
			first = s
		}
	}
	return first
}

// delta shows a live delta.
func (v *lineView) delta(d protocol.SessionDelta) {
	switch d.Event {
	case protocol.EventMessageStart:
		v.start(replyKey(d.MessageID), d.TurnID, d.MessageID)
	case protocol.EventMessageUpdate:
		if s := v.open[replyKey(d.MessageID)]; s != nil {
			v.skipped(s, d.Skipped)
			s.text.WriteString(d.Text)
		}
	case protocol.EventMessageEnd:
		if s := v.open[replyKey(d.MessageID)]; s != nil {
			v.endReply(s, d.Text)
			return
		}
	case protocol.EventToolCallStart:
		if d.ToolCall != nil {
			v.start(toolKey(d.ToolCall.ID), d.TurnID, d.ToolCall.ID)
		}
	case protocol.EventToolCallUpdate:
		if d.ToolCall == nil {
			break
		}
		s := v.open[toolKey(d.ToolCall.ID)]
		if s == nil {
			// Its start was not seen: whatever came before is unknown.
			v.start(toolKey(d.ToolCall.ID), d.TurnID, d.ToolCall.ID)
			s = v.open[toolKey(d.ToolCall.ID)]
			s.gapAt = 0
		}
		v.skipped(s, d.Skipped)
		s.text.WriteString(d.ToolCall.Output)
	case protocol.EventToolCallEnd:
		if d.ToolCall == nil {
			break
		}
		if s := v.open[toolKey(d.ToolCall.ID)]; s != nil {
			v.endTool(s, d.ToolCall.Output, d.ToolCall.IsError)
			return
		}
	case protocol.EventRunEnd:
		for key, s := range v.open {
			if key[0] == 'm' && s.turnID == d.TurnID {
				delete(v.open, key) // the turn's end ends its replies
			}
		}
	case protocol.EventInteractionAdded:
		if in := d.Interaction; in != nil && in.State == protocol.InteractionPending {
			v.pending[in.InteractionID] = true
		}
	case protocol.EventInteractionResolved:
		if in := d.Interaction; in != nil {
			delete(v.pending, in.InteractionID)
		}
	}
	v.emit(d)
}

// start notes a reply or tool call that starts.
func (v *lineView) start(key, turnID, id string) {
	if v.open[key] == nil {
		v.started++
		v.open[key] = &shown{turnID: turnID, id: id, order: v.started, gapAt: -1}
	}
}

// skipped says that n bytes of s were left out before what comes next.
func (v *lineView) skipped(s *shown, n int64) {
	if n <= 0 {
		return
	}
	s.gapAt = s.text.Len()
	v.note(skippedNote(n))
}

// skippedNote is the line that says n bytes of a stream were left out.
func skippedNote(n int64) string { return "… " + decimalSize(n) + " skipped …" }

// decimalSize says n bytes for people, in powers of ten.
func decimalSize(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d bytes", n)
	case n < 1000_000:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	case n < 1000_000_000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.1f GB", float64(n)/1e9)
}

// rest returns what of whole, a later form of s's text (a projection's,
// or the whole at its end), follows what s has shown. When s has shown
// whole's start, that is the rest of whole; else (bytes were skipped, or
// whole keeps only a tail) it is what follows the last of s's text that
// whole holds. found is false when whole holds none of it.
func (s *shown) rest(whole string) (rest string, found bool) {
	have := s.text.String()
	if s.gapAt < 0 && strings.HasPrefix(whole, have) {
		return whole[len(have):], true
	}
	from := max(0, len(have)-restProbe)
	if s.gapAt >= 0 && s.gapAt < len(have) {
		from = max(from, s.gapAt)
	}
	probe := have[from:]
	if probe == "" {
		return whole, true
	}
	if i := strings.LastIndex(whole, probe); i >= 0 {
		return whole[i+len(probe):], true
	}
	return "", false
}

// restProbe bounds how much of the text shown last rest looks for.
const restProbe = 512

// endReply ends reply s with its whole text: what was not shown of it
// first.
func (v *lineView) endReply(s *shown, whole string) {
	delete(v.open, replyKey(s.id))
	if rest, _ := s.rest(whole); rest != "" {
		v.emit(protocol.SessionDelta{Event: protocol.EventMessageUpdate, TurnID: s.turnID, MessageID: s.id, Text: rest})
	}
	v.emit(protocol.SessionDelta{Event: protocol.EventMessageEnd, TurnID: s.turnID, MessageID: s.id})
}

// endTool ends tool call s with its whole output: what was not shown of
// it first.
func (v *lineView) endTool(s *shown, whole string, isError bool) {
	delete(v.open, toolKey(s.id))
	rest, found := s.rest(whole)
	if !found {
		// What was shown last is not in what the call kept of its output:
		// its end follows bytes left out.
		v.note("… output skipped …")
		rest = s.unseen(lastLines(whole, endLines))
	}
	if rest != "" {
		v.emit(protocol.SessionDelta{Event: protocol.EventToolCallUpdate, TurnID: s.turnID, ToolCall: &protocol.ToolCallInfo{ID: s.id, Output: rest}})
	}
	// The end carries what was shown, so that the feed adds nothing.
	v.emit(protocol.SessionDelta{Event: protocol.EventToolCallEnd, TurnID: s.turnID,
		ToolCall: &protocol.ToolCallInfo{ID: s.id, Output: s.text.String() + rest, IsError: isError}})
}

// endLines is how many of its last lines a tool call's end shows when what
// was shown of its output is not in what it kept.
const endLines = 10

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	end := strings.TrimSuffix(s, "\n")
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] == '\n' {
			if n--; n == 0 {
				return s[i+1:]
			}
		}
	}
	return s
}

// unseen returns lines without those of its first lines that s has
// shown.
func (s *shown) unseen(lines string) string {
	have := s.text.String()
	for lines != "" {
		line, _, _ := strings.Cut(lines, "\n")
		line += "\n"
		if !strings.HasPrefix(have, line) && !strings.Contains(have, "\n"+line) {
			break
		}
		lines = lines[min(len(line), len(lines)):]
	}
	return lines
}

// restoreNow shows what the projection of the stream opened last holds
// that was not shown: the replies streaming and the tool calls running,
// with their text so far, and the approvals pending.
func (v *lineView) restoreNow() {
	snap := v.restore
	v.restore = nil
	for _, m := range snap.Streams {
		key := replyKey(m.MessageID)
		s := v.open[key]
		if s == nil {
			v.start(key, m.TurnID, m.MessageID)
			s = v.open[key]
			v.emit(protocol.SessionDelta{Event: protocol.EventMessageStart, TurnID: m.TurnID, MessageID: m.MessageID})
		}
		v.more(s, m.Text, func(text string) protocol.SessionDelta {
			return protocol.SessionDelta{Event: protocol.EventMessageUpdate, TurnID: m.TurnID, MessageID: m.MessageID, Text: text}
		})
	}
	for _, c := range snap.ToolCalls {
		key := toolKey(c.ID)
		s := v.open[key]
		if s == nil {
			v.start(key, c.TurnID, c.ID)
			s = v.open[key]
			v.emit(protocol.SessionDelta{Event: protocol.EventToolCallStart, TurnID: c.TurnID,
				ToolCall: &protocol.ToolCallInfo{ID: c.ID, Name: c.Name, Arguments: c.Arguments}})
		}
		v.more(s, c.Output, func(text string) protocol.SessionDelta {
			return protocol.SessionDelta{Event: protocol.EventToolCallUpdate, TurnID: c.TurnID, ToolCall: &protocol.ToolCallInfo{ID: c.ID, Output: text}}
		})
	}
	for _, in := range snap.Interactions {
		if in.State == protocol.InteractionPending && !v.pending[in.InteractionID] {
			v.pending[in.InteractionID] = true
			v.emit(protocol.SessionDelta{Event: protocol.EventInteractionAdded, Interaction: &in})
		}
	}
}

// more shows what of so far, a projection's form of s's text, s has not
// shown, through the delta update makes of it; when so far holds none of
// what s showed, bytes between were left out, and a note says so.
func (v *lineView) more(s *shown, soFar string, update func(string) protocol.SessionDelta) {
	rest, found := s.rest(soFar)
	if !found {
		s.gapAt, rest = s.text.Len(), soFar
		v.note("… output skipped …")
	}
	if rest != "" {
		s.text.WriteString(rest)
		v.emit(update(rest))
	}
}

// followShown follows a session until ctx ends, writing its events
// through feed as lines, once each and in order across reopened streams
// (see lineView), or as JSON lines; it says when the connection drops and
// goes on once it has reopened the stream. A stream that ends for good
// ends it with why: the host was shut down (client.ErrHostShutDown), the
// session removed (client.ErrSessionRemoved). It closes f.
func followShown(ctx context.Context, e *env, f *client.Follower, feed *tui.Feed, asJSON bool, mode jsonMode) error {
	defer f.Close()
	v := newLineView(feed.Delta, func(text string) { feed.Note(text, false) })
	if !asJSON {
		v.opened(f.Session().Snapshot(), f.LastRecord())
	}
	for {
		ev, err := f.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted: following ends
			}
			return err
		}
		switch {
		case ev.Lost != nil:
			fmt.Fprintf(e.stderr, "agentd: connection lost (%v): reconnecting\n", ev.Lost)
		case ev.Reopened:
			fmt.Fprintln(e.stderr, "agentd: reconnected")
			if !asJSON {
				v.opened(*ev.Snapshot, f.LastRecord())
			}
		case asJSON && mode == jsonRecords:
			if ev.Record != nil {
				fmt.Fprintf(e.stdout, "%s\n", ev.Delta.Entry)
			}
		case asJSON:
			if ev.Raw != nil {
				fmt.Fprintf(e.stdout, "%s\n", ev.Raw)
			}
		default:
			v.event(ev.SessionEvent)
		}
	}
}
