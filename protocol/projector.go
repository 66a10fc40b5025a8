package protocol

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// TranscriptRecord is one line of a session's transcript, as entry_added
// deltas and transcript pages carry it. Data's shape depends on Type.
type TranscriptRecord struct {
	Seq    uint64          `json:"seq"`
	Time   time.Time       `json:"time"`
	Type   string          `json:"type"`
	TurnID string          `json:"turnId,omitempty"`
	Data   json.RawMessage `json:"data"`
	// OmittedBytes, when set, says Data was left out of an entry_added
	// delta because it would not fit the wire limit: it is this many
	// bytes, and session.transcript.page reads the record whole.
	OmittedBytes int `json:"omittedBytes,omitempty"`
}

// MaxRecordOnWire bounds a transcript record's line as a delta or a page
// carries it, leaving room for the frame around it within MaxMessageBytes.
const MaxRecordOnWire = MaxMessageBytes - 16<<10

// FitRecord returns a transcript record's line as it may go on the wire:
// the line itself when it is at most MaxRecordOnWire bytes, else the
// record without its data, OmittedBytes saying how much was left out.
func FitRecord(line json.RawMessage) json.RawMessage {
	if len(line) <= MaxRecordOnWire {
		return line
	}
	var rec TranscriptRecord
	if json.Unmarshal(line, &rec) != nil {
		rec = TranscriptRecord{}
	}
	rec.OmittedBytes, rec.Data = len(rec.Data), nil
	out, _ := json.Marshal(rec)
	return out
}

// Projector follows a session as a subscriber does: it starts from a
// snapshot and applies deltas in order. Streaming text grows in builders,
// so a long message of many small deltas costs linear time. It is not safe
// for concurrent use.
type Projector struct {
	p       SessionProjection
	streams []*streamText // in the order they started
	calls   []*callOutput // in the order they started
}

type callOutput struct {
	call   RunningToolCall
	output strings.Builder
}

// tail returns the call's output so far, cut to MaxRunningOutput; the
// builder is cut only when it holds twice that, so many small updates
// cost linear time.
func (c *callOutput) tail() string {
	s := c.output.String()
	if len(s) <= MaxRunningOutput {
		return s
	}
	i := len(s) - MaxRunningOutput
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

func (c *callOutput) add(chunk string) {
	c.output.WriteString(chunk)
	if c.output.Len() > 2*MaxRunningOutput {
		t := c.tail()
		c.output.Reset()
		c.output.WriteString(t)
	}
}

type streamText struct {
	turnID, messageID string
	text, thinking    strings.Builder
}

// NewProjector starts from snap. The projector shares nothing with snap:
// several projectors may start from one snapshot, and the snapshot stays
// as it was.
func NewProjector(snap SessionProjection) *Projector {
	pr := &Projector{p: snap}
	pr.p.Streams, pr.p.ToolCalls = nil, nil
	if snap.RootTurn != nil {
		pr.p.RootTurn = new(*snap.RootTurn)
	}
	pr.p.Queue = Queue{Steering: slices.Clone(snap.Queue.Steering), FollowUp: slices.Clone(snap.Queue.FollowUp)}
	pr.p.Interactions, pr.p.Todo = slices.Clone(snap.Interactions), slices.Clone(snap.Todo)
	for _, c := range snap.ToolCalls {
		co := &callOutput{call: c}
		co.output.WriteString(c.Output)
		pr.calls = append(pr.calls, co)
	}
	for _, s := range snap.Streams {
		st := &streamText{turnID: s.TurnID, messageID: s.MessageID}
		st.text.WriteString(s.Text)
		st.thinking.WriteString(s.Thinking)
		pr.streams = append(pr.streams, st)
	}
	return pr
}

// Apply changes the projection by d. A delta that names what the
// projection does not hold (a message that never started, say) changes
// nothing.
func (pr *Projector) Apply(d SessionDelta) {
	p := &pr.p
	switch d.Event {
	case EventRunStart:
		if d.Turn != nil {
			p.RootTurn = new(*d.Turn)
		}
	case EventRunEnd:
		if d.Turn != nil {
			p.RootTurn = new(*d.Turn)
		}
		pr.streams = slices.DeleteFunc(pr.streams, func(s *streamText) bool { return s.turnID == d.TurnID })
		pr.calls = slices.DeleteFunc(pr.calls, func(c *callOutput) bool { return c.call.TurnID == d.TurnID })
	case EventToolCallStart:
		if d.ToolCall != nil && pr.call(d.ToolCall.ID) == nil {
			pr.calls = append(pr.calls, &callOutput{call: RunningToolCall{TurnID: d.TurnID, ID: d.ToolCall.ID, Name: d.ToolCall.Name, Arguments: d.ToolCall.Arguments}})
		}
	case EventToolCallUpdate:
		if d.ToolCall != nil {
			if c := pr.call(d.ToolCall.ID); c != nil {
				c.add(d.ToolCall.Output)
			}
		}
	case EventToolCallEnd:
		if d.ToolCall != nil {
			pr.calls = slices.DeleteFunc(pr.calls, func(c *callOutput) bool { return c.call.ID == d.ToolCall.ID })
		}
	case EventMessageStart:
		if pr.stream(d.MessageID) == nil {
			pr.streams = append(pr.streams, &streamText{turnID: d.TurnID, messageID: d.MessageID})
		}
	case EventMessageUpdate:
		if s := pr.stream(d.MessageID); s != nil {
			s.text.WriteString(d.Text)
			s.thinking.WriteString(d.Thinking)
		}
	case EventMessageEnd:
		pr.streams = slices.DeleteFunc(pr.streams, func(s *streamText) bool { return s.messageID == d.MessageID })
	case EventEntryAdded:
		var head struct {
			Seq uint64 `json:"seq"`
		}
		if json.Unmarshal(d.Entry, &head) == nil && head.Seq > p.TranscriptSequence {
			p.TranscriptSequence = head.Seq
		}
	case EventQueueChanged:
		if d.Queue != nil {
			p.Queue = Queue{Steering: slices.Clone(d.Queue.Steering), FollowUp: slices.Clone(d.Queue.FollowUp)}
		}
	case EventInteractionAdded:
		if d.Interaction != nil {
			p.Interactions = append(slices.DeleteFunc(p.Interactions, func(in Interaction) bool {
				return in.InteractionID == d.Interaction.InteractionID
			}), *d.Interaction)
		}
	case EventInteractionResolved:
		if d.Interaction != nil {
			p.Interactions = slices.DeleteFunc(p.Interactions, func(in Interaction) bool {
				return in.InteractionID == d.Interaction.InteractionID
			})
		}
	case EventTodoChanged:
		p.Todo = slices.Clone(d.Todo)
	case EventSessionChanged:
		if d.Session != nil {
			p.Session = *d.Session
		}
	}
}

func (pr *Projector) call(id string) *callOutput {
	for _, c := range pr.calls {
		if c.call.ID == id {
			return c
		}
	}
	return nil
}

func (pr *Projector) stream(messageID string) *streamText {
	for _, s := range pr.streams {
		if s.messageID == messageID {
			return s
		}
	}
	return nil
}

// Projection returns the projection as it stands, sharing nothing with
// the projector.
func (pr *Projector) Projection() SessionProjection {
	p := pr.p
	if p.RootTurn != nil {
		p.RootTurn = new(*p.RootTurn)
	}
	p.Queue = Queue{Steering: nonNil(p.Queue.Steering), FollowUp: nonNil(p.Queue.FollowUp)}
	p.Interactions = nonNil(p.Interactions)
	p.Todo = nonNil(p.Todo)
	p.Streams = make([]MessageStream, 0, len(pr.streams))
	for _, s := range pr.streams {
		p.Streams = append(p.Streams, MessageStream{TurnID: s.turnID, MessageID: s.messageID, Text: s.text.String(), Thinking: s.thinking.String()})
	}
	p.ToolCalls = make([]RunningToolCall, 0, len(pr.calls))
	for _, c := range pr.calls {
		rc := c.call
		rc.Output = c.tail()
		p.ToolCalls = append(p.ToolCalls, rc)
	}
	return p
}

// Session returns the session as the projection has it.
func (pr *Projector) Session() Session { return pr.p.Session }

// nonNil clones s, as an empty slice when s is empty: the wire has [] for
// an empty list, never null.
func nonNil[T any](s []T) []T {
	return append(make([]T, 0, len(s)), s...)
}
