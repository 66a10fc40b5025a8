// Package tui shows a session to a person: a Feed turns its transcript
// records and live deltas into the blocks a person reads (prompts,
// replies, tool calls with their output, turn boundaries), once each
// however they arrive; Lines writes a feed as plain lines (agentd run, log
// and attach off a terminal), and Run mirrors a session full-screen on a
// terminal. Text from models and tools is shown, never interpreted: its
// control characters are made visible.
//
// It knows the protocol and the public client, nothing of the host or the
// worker.
package tui

import (
	"encoding/json"
	"time"

	"github.com/agentd-dev/agentd/protocol"
)

// BlockKind says what a block shows.
type BlockKind int

// Block kinds.
const (
	// BlockTurn opens a turn.
	BlockTurn BlockKind = iota
	// BlockUser is a prompt or a steering message.
	BlockUser
	// BlockAssistant is a reply of the model: Markdown.
	BlockAssistant
	// BlockTool is a tool call with its output.
	BlockTool
	// BlockEnd closes a turn, with its status.
	BlockEnd
	// BlockNote is something that happened beside the transcript: an
	// approval asked or answered, a connection lost.
	BlockNote
)

// Block is one thing a person reads in a session's transcript.
type Block struct {
	Kind   BlockKind
	TurnID string
	// Seq is the transcript record the block came from; 0 for a block
	// only seen live so far.
	Seq uint64
	// Time is when the block's record was written; zero for a block seen
	// live.
	Time time.Time
	// Text is the prompt, the reply, the turn's status, or the note.
	Text string
	// Tool is the call of a BlockTool.
	Tool ToolCall
	// Steering marks a user message sent into a running turn.
	Steering bool
	// Done is false while a reply streams or a tool runs.
	Done bool
	// Error marks a failed turn, a failed tool call, a lost connection.
	Error bool

	messageID string // the live message a BlockAssistant streams
}

// ToolCall is a tool call as a block shows it.
type ToolCall struct {
	ID, Name  string
	Arguments json.RawMessage
	Output    string
}

// Change is what a Feed did to one block.
type Change struct {
	Block *Block
	// New is set when the block was added.
	New bool
	// Added is the text the block gained: more of a reply, more output.
	Added string
	// Replaced is set when the block's text or output was replaced rather
	// than extended (a reply cut short by a lost stream, made whole).
	Replaced bool
	// Done is set when the block became complete.
	Done bool
}

// Feed assembles a session's blocks from transcript records and live
// deltas, in any mix: a record the feed has applied, or whose content a
// delta brought already, adds nothing. It is not safe for concurrent use.
type Feed struct {
	// Blocks are the blocks in order.
	Blocks []*Block
	// OnChange, when set, is called for every change, in order.
	OnChange func(Change)

	last   uint64            // the last record applied
	turns  map[string]*Block // by turn id: its BlockTurn
	ends   map[string]*Block // by turn id: its BlockEnd
	tools  map[string]*Block // by call id
	notes  map[string]*Block // by interaction id
	stream map[string]*Block // by message id: a reply streaming

	compacting *Block // the note of a compaction running, nil when none is
}

// NewFeed returns a feed that has applied the records up to last.
func NewFeed(last uint64) *Feed {
	return &Feed{
		last: last, turns: map[string]*Block{}, ends: map[string]*Block{},
		tools: map[string]*Block{}, notes: map[string]*Block{}, stream: map[string]*Block{},
	}
}

// Last returns the last transcript record the feed has applied.
func (f *Feed) Last() uint64 { return f.last }

func (f *Feed) add(b *Block) *Block {
	f.Blocks = append(f.Blocks, b)
	f.changed(Change{Block: b, New: true, Done: b.Done})
	return b
}

func (f *Feed) changed(c Change) {
	if f.OnChange != nil {
		f.OnChange(c)
	}
}

// Note adds a note.
func (f *Feed) Note(text string, isError bool) {
	f.add(&Block{Kind: BlockNote, Text: text, Error: isError, Done: true})
}

// Streams shows the replies a projection holds still streaming, as a
// stream opened (or opened again) found them: their text so far replaces
// what the feed has. A reply the feed streamed that is not among them
// stays open until its record completes it.
func (f *Feed) Streams(streams []protocol.MessageStream) {
	for _, s := range streams {
		if b := f.stream[s.MessageID]; b != nil && b.TurnID == s.TurnID {
			if b.Text != s.Text {
				b.Text = s.Text
				f.changed(Change{Block: b, Replaced: true})
			}
			continue
		}
		f.stream[s.MessageID] = f.add(&Block{Kind: BlockAssistant, TurnID: s.TurnID, messageID: s.MessageID, Text: s.Text})
	}
}

// Delta applies a live delta; the record of an entry_added is applied as
// Record applies it.
func (f *Feed) Delta(d protocol.SessionDelta) {
	switch d.Event {
	case protocol.EventRunStart:
		f.turn(d.TurnID, 0)
	case protocol.EventMessageStart:
		if f.stream[d.MessageID] == nil {
			f.stream[d.MessageID] = f.add(&Block{Kind: BlockAssistant, TurnID: d.TurnID, messageID: d.MessageID})
		}
	case protocol.EventMessageUpdate:
		if b := f.stream[d.MessageID]; b != nil && d.Text != "" {
			b.Text += d.Text
			f.changed(Change{Block: b, Added: d.Text})
		}
	case protocol.EventMessageEnd:
		if b := f.stream[d.MessageID]; b != nil {
			delete(f.stream, d.MessageID)
			f.finish(b, d.Text)
		}
	case protocol.EventToolCallStart, protocol.EventToolCallUpdate, protocol.EventToolCallEnd:
		if d.ToolCall == nil {
			return
		}
		b := f.tools[d.ToolCall.ID]
		if b == nil {
			b = &Block{Kind: BlockTool, TurnID: d.TurnID, Tool: ToolCall{ID: d.ToolCall.ID, Name: d.ToolCall.Name, Arguments: d.ToolCall.Arguments}}
			f.tools[d.ToolCall.ID] = f.add(b)
		}
		if b.Done {
			return
		}
		switch d.Event {
		case protocol.EventToolCallUpdate:
			b.Tool.Output += d.ToolCall.Output
			f.changed(Change{Block: b, Added: d.ToolCall.Output})
		case protocol.EventToolCallEnd:
			f.toolDone(b, d.ToolCall.Output, d.ToolCall.IsError)
		}
	case protocol.EventEntryAdded:
		var r protocol.TranscriptRecord
		if json.Unmarshal(d.Entry, &r) == nil {
			f.Record(r)
		}
	case protocol.EventRunEnd:
		if d.Turn != nil {
			f.end(d.Turn.TurnID, d.Turn.Status, d.Turn.Error, d.Turn.Usage, 0)
			for id, b := range f.stream {
				if b.TurnID == d.Turn.TurnID {
					delete(f.stream, id)
					f.finish(b, "")
				}
			}
		}
	case protocol.EventModelRetry:
		if d.Retry != nil {
			f.add(&Block{Kind: BlockNote, TurnID: d.TurnID, Text: RetryText(*d.Retry), Done: true})
		}
	case protocol.EventCompaction:
		f.compactionDelta(d)
	case protocol.EventInteractionAdded:
		if in := d.Interaction; in != nil && f.notes[in.InteractionID] == nil {
			f.notes[in.InteractionID] = f.add(&Block{Kind: BlockNote, TurnID: d.TurnID, Text: "waiting for approval: " + in.Prompt})
		}
	case protocol.EventInteractionResolved:
		in := d.Interaction
		if in == nil {
			return
		}
		b := f.notes[in.InteractionID]
		if b == nil || b.Done {
			return
		}
		switch {
		case in.State == protocol.InteractionCancelled:
			b.Text = "cancelled: " + in.Prompt
		case in.Answer == protocol.AnswerAllow:
			b.Text = "allowed: " + in.Prompt
		case in.Answer == protocol.AnswerAllowAlways:
			b.Text = "allowed for the session: " + in.Prompt
		default:
			b.Text, b.Error = "denied: "+in.Prompt, true
		}
		b.Done = true
		f.changed(Change{Block: b, Replaced: true, Done: true})
	}
}

// finish completes a streamed reply; whole, when given, is its whole text.
func (f *Feed) finish(b *Block, whole string) {
	if whole != "" && whole != b.Text {
		if rest, ok := cutPrefix(whole, b.Text); ok {
			b.Text = whole
			f.changed(Change{Block: b, Added: rest})
		} else {
			b.Text = whole
			f.changed(Change{Block: b, Replaced: true})
		}
	}
	b.Done = true
	f.changed(Change{Block: b, Done: true})
}

func (f *Feed) toolDone(b *Block, output string, isError bool) {
	if output != b.Tool.Output {
		if rest, ok := cutPrefix(output, b.Tool.Output); ok {
			b.Tool.Output = output
			f.changed(Change{Block: b, Added: rest})
		} else {
			b.Tool.Output = output
			f.changed(Change{Block: b, Replaced: true})
		}
	}
	b.Done, b.Error = true, isError
	f.changed(Change{Block: b, Done: true})
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
		return s[len(prefix):], true
	}
	return "", false
}

func (f *Feed) turn(id string, seq uint64) {
	if id == "" {
		return
	}
	if b := f.turns[id]; b != nil {
		if b.Seq == 0 {
			b.Seq = seq
		}
		return
	}
	f.turns[id] = f.add(&Block{Kind: BlockTurn, TurnID: id, Seq: seq, Done: true})
}

func (f *Feed) end(id, status, errText string, usage protocol.TurnUsage, seq uint64) {
	if id == "" || f.ends[id] != nil {
		return
	}
	text := status
	if errText != "" {
		text += ": " + errText
	}
	if usage != (protocol.TurnUsage{}) {
		text += " · " + UsageText(usage)
	}
	f.ends[id] = f.add(&Block{Kind: BlockEnd, TurnID: id, Seq: seq, Text: text, Done: true, Error: status != protocol.TurnCompleted})
}

// Record applies a transcript record. A record at or before the last one
// applied adds nothing.
func (f *Feed) Record(r protocol.TranscriptRecord) {
	if r.Seq != 0 && r.Seq <= f.last {
		return
	}
	if r.Seq > f.last {
		f.last = r.Seq
	}
	switch r.Type {
	case protocol.RecordTurnStart:
		f.turn(r.TurnID, r.Seq)
		if b := f.turns[r.TurnID]; b != nil && b.Time.IsZero() {
			b.Time = r.Time
		}
		var d protocol.TurnStartData
		if json.Unmarshal(r.Data, &d) == nil && len(d.Instructions) > 0 {
			f.add(&Block{Kind: BlockNote, TurnID: r.TurnID, Seq: r.Seq, Text: InstructionsNote(d.Instructions), Done: true})
		}
	case protocol.RecordTurnEnd:
		var d protocol.TurnEndData
		json.Unmarshal(r.Data, &d)
		f.end(r.TurnID, d.Status, d.Error, d.Usage, r.Seq)
	case protocol.RecordCompaction:
		f.compactionRecord(r)
	case protocol.RecordFileChange:
		f.add(&Block{Kind: BlockNote, TurnID: r.TurnID, Seq: r.Seq, Time: r.Time, Text: fileChangeNote(r), Done: true})
	case protocol.RecordForked:
		f.add(&Block{Kind: BlockNote, Seq: r.Seq, Time: r.Time, Text: forkedNote(r), Done: true})
	case protocol.RecordUserMessage:
		var d protocol.UserMessageData
		json.Unmarshal(r.Data, &d)
		f.add(&Block{Kind: BlockUser, TurnID: r.TurnID, Seq: r.Seq, Text: d.Text, Steering: d.Steering, Done: true})
	case protocol.RecordAssistantMessage:
		var m protocol.MessageData
		json.Unmarshal(r.Data, &m)
		text := m.Text()
		if b := f.unmatchedReply(r.TurnID); b != nil {
			b.Seq = r.Seq
			if !b.Done {
				for id, s := range f.stream {
					if s == b {
						delete(f.stream, id)
					}
				}
				f.finish(b, text)
			}
		} else if text != "" {
			f.add(&Block{Kind: BlockAssistant, TurnID: r.TurnID, Seq: r.Seq, Text: text, Done: true})
		}
		for _, p := range m.Parts {
			if c := p.ToolCall; c != nil && f.tools[c.ID] == nil {
				f.tools[c.ID] = f.add(&Block{Kind: BlockTool, TurnID: r.TurnID, Seq: r.Seq, Tool: ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments}})
			}
		}
	case protocol.RecordToolResults:
		var m protocol.MessageData
		json.Unmarshal(r.Data, &m)
		for _, p := range m.Parts {
			res := p.ToolResult
			if res == nil {
				continue
			}
			b := f.tools[res.CallID]
			if b == nil {
				b = &Block{Kind: BlockTool, TurnID: r.TurnID, Seq: r.Seq, Tool: ToolCall{ID: res.CallID, Name: res.Name}}
				f.tools[res.CallID] = f.add(b)
			}
			if !b.Done {
				f.toolDone(b, res.Content, res.IsError)
			}
		}
	}
}

// unmatchedReply returns the first reply of turnID seen live and not yet
// matched to its record.
func (f *Feed) unmatchedReply(turnID string) *Block {
	for _, b := range f.Blocks {
		if b.Kind == BlockAssistant && b.Seq == 0 && b.TurnID == turnID {
			return b
		}
	}
	return nil
}
