package tui

import (
	"fmt"
	"slices"

	"github.com/agentd-dev/agentd/protocol"
)

// A screen that reads its stream slower than a reply or a tool's output
// comes is skipped ahead to the newest by the host: an update delta then
// says how many bytes it left out just before it (SessionDelta.Skipped).
// The screen marks the place, dim, while the block streams; once it is
// complete its whole text replaces what streamed, and the marks go.

// skip is a place in a streaming block's text (or output) where the
// stream left n bytes out: before byte at.
type skip struct {
	at int
	n  int64
}

// skipped marks where update delta d says its stream left bytes out: at
// the end of the block it grows.
func (m *model) skipped(d protocol.SessionDelta) {
	var b *Block
	var at int
	switch d.Event {
	case protocol.EventMessageUpdate:
		if b = m.streaming(d.MessageID); b != nil {
			at = len(b.Text)
		}
	case protocol.EventToolCallUpdate:
		if d.ToolCall == nil {
			return
		}
		if b = m.toolBlock(d.ToolCall.ID); b != nil {
			at = len(b.Tool.Output)
		}
	}
	if b == nil || b.Done {
		return
	}
	ss := m.skips[b]
	if n := len(ss); n > 0 && ss[n-1].at == at {
		ss[n-1].n += d.Skipped
	} else {
		ss = append(ss, skip{at: at, n: d.Skipped})
	}
	m.skips[b] = ss
}

// streaming returns the reply of live message id that streams, or nil.
func (m *model) streaming(id string) *Block {
	for _, b := range slices.Backward(m.feed.Blocks) {
		if b.Kind == BlockAssistant && b.messageID == id && !b.Done {
			return b
		}
	}
	return nil
}

// skippedText is the mark of n bytes skipped.
func skippedText(n int64) string {
	return "… " + byteSize(n) + " skipped …"
}

// byteSize is n bytes as a person reads it: 512 B, 12.3 kB, 12.3 MB.
func byteSize(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000*1000:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	case n < 1000*1000*1000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.1f GB", float64(n)/1e9)
}

// split cuts s at each skip, in order: the pieces between, and before each
// piece but the first the skip that precedes it.
func split(s string, skips []skip) (pieces []string, between []skip) {
	prev := 0
	for _, sk := range skips {
		at := min(max(sk.at, prev), len(s))
		pieces = append(pieces, s[prev:at])
		between = append(between, sk)
		prev = at
	}
	return append(pieces, s[prev:]), between
}
