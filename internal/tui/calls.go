package tui

import (
	"slices"
	"strings"

	"github.com/agentd-dev/agentd/protocol"
)

// The screen reads the transcript before its stream's start in pages (its
// history) and follows the stream in a feed of its own. A tool call that
// runs as the screen opens is in both: its call in the history's last
// reply, its output so far in the snapshot's running calls, the rest in
// the stream. It is drawn once, where the history has it: the history's
// block gives way to the feed's, which the stream goes on growing.

// runningCalls shows the tool calls a projection holds still running, as
// a stream opened (or opened again) found them. A call the screen has
// not seen is added with its output so far; one it has gets the output
// the projection holds where the stream left some out while it was lost.
func (m *model) runningCalls(calls []protocol.RunningToolCall) {
	for _, c := range calls {
		b := m.toolBlock(c.ID)
		if b == nil {
			m.feed.Delta(protocol.SessionDelta{Event: protocol.EventToolCallStart, TurnID: c.TurnID,
				ToolCall: &protocol.ToolCallInfo{ID: c.ID, Name: c.Name, Arguments: c.Arguments}})
			if c.Output != "" {
				m.feed.Delta(protocol.SessionDelta{Event: protocol.EventToolCallUpdate, TurnID: c.TurnID,
					ToolCall: &protocol.ToolCallInfo{ID: c.ID, Name: c.Name, Output: c.Output}})
			}
			continue
		}
		// The projection holds the call's latest output, cut to
		// MaxRunningOutput: the block's output is kept where it ends
		// with it, or goes on into it.
		if b.Done || strings.HasSuffix(b.Tool.Output, c.Output) {
			continue
		}
		if !strings.HasPrefix(c.Output, b.Tool.Output) {
			delete(m.skips, b)
		}
		b.Tool.Output = c.Output
		delete(m.render.cache, b)
	}
}

// toolBlock returns the block of tool call id the screen draws, or nil.
func (m *model) toolBlock(id string) *Block {
	for _, bs := range [][]*Block{m.feed.Blocks, m.history} {
		for _, b := range slices.Backward(bs) {
			if b.Kind == BlockTool && b.Tool.ID == id {
				return b
			}
		}
	}
	return nil
}

// joinCalls readies a page of history, older than the history the screen
// has, to go above it: every block is complete, and each tool call is
// drawn once. A call the feed has a block for takes that block in the
// page's place; one still running waits for the feed's; one whose result
// the newer history has takes the result, which the newer history gives
// up.
func (m *model) joinCalls(older []*Block) []*Block {
	for i, h := range older {
		if h.Kind != BlockTool || h.Done {
			h.Done = true
			continue
		}
		if j := slices.IndexFunc(m.feed.Blocks, sameCall(h)); j >= 0 {
			older[i] = m.takeCall(h, j)
			continue
		}
		if k := slices.IndexFunc(m.history, sameCall(h)); k >= 0 {
			r := m.history[k]
			m.history = slices.Delete(m.history, k, k+1)
			h.Tool.Output, h.Error = r.Tool.Output, r.Error
		} else {
			m.awaited[h.Tool.ID] = h
		}
		h.Done = true
	}
	return older
}

// sameCall returns whether a block is of h's tool call.
func sameCall(h *Block) func(*Block) bool {
	return func(b *Block) bool { return b.Kind == BlockTool && b.Tool.ID == h.Tool.ID }
}

// changed follows what the feed does to its blocks: a tool call's block
// that a history block waits for takes its place there, and a block whose
// text was replaced loses its marks of what was skipped.
func (m *model) changed(c Change) {
	b := c.Block
	if c.Replaced {
		delete(m.skips, b)
	}
	if c.New && b.Kind == BlockNote {
		m.placeNote(b)
		return
	}
	if !c.New || b.Kind != BlockTool {
		return
	}
	h := m.awaited[b.Tool.ID]
	if h == nil {
		return
	}
	delete(m.awaited, b.Tool.ID)
	i, j := slices.Index(m.history, h), slices.Index(m.feed.Blocks, b)
	if i >= 0 && j >= 0 {
		m.history[i] = m.takeCall(h, j)
	}
}

// takeCall takes the feed's block j out of the feed, for the history's
// block h of the same call, still running there, and returns it with
// what h knows of the call.
func (m *model) takeCall(h *Block, j int) *Block {
	b := m.feed.Blocks[j]
	m.feed.Blocks = slices.Delete(m.feed.Blocks, j, j+1)
	b.Seq, b.Time = h.Seq, h.Time
	if len(b.Tool.Arguments) == 0 {
		b.Tool.Arguments = h.Tool.Arguments
	}
	if b.Tool.Name == "" {
		b.Tool.Name = h.Tool.Name
	}
	return b
}

// placedNote is a note drawn inside a tool call's block: after the first
// at bytes of its output, those it had when the note came.
type placedNote struct {
	at   int
	note *Block
}

// placeNote draws note n, when a tool call runs as it comes, inside the
// call's block where its output then ends: an approval asked before the
// call's output, a lost connection amid it; not below what came after.
func (m *model) placeNote(n *Block) {
	for _, b := range slices.Backward(m.feed.Blocks) {
		switch {
		case b == n || b.Kind == BlockNote:
			continue
		case b.Kind == BlockTool && !b.Done && (n.TurnID == "" || n.TurnID == b.TurnID):
			m.inTool[b] = append(m.inTool[b], placedNote{at: len(b.Tool.Output), note: n})
			m.placed[n] = true
		}
		return
	}
}
