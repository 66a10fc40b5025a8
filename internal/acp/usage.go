package acp

import (
	"encoding/json"

	"github.com/agentd-dev/agentd/client"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agentd-dev/agentd/protocol"
)

// usage is what a usage_update says of a session: the tokens in its
// context, its model's window, and what its model calls cost.
type usage struct {
	used, size int
	// cost is the session's cost in US dollars, summed over the turns'
	// and the compactions' records; known once the whole transcript was
	// read (session/load), never on session/resume.
	cost      float64
	costKnown bool
	priced    bool // a call had a known price
}

// turnUsage takes in what a turn_end record's usage says.
func (u *usage) turn(t protocol.TurnUsage) {
	if t.ContextWindow > 0 {
		u.used, u.size = t.ContextTokens, t.ContextWindow
	}
	if t.CostUSD > 0 {
		u.cost += t.CostUSD
		u.priced = true
	}
}

// compaction takes in what a compaction record says: the context is the
// summary and what was kept. A compaction in a turn is paid for in the
// turn's usage; one between turns only here.
func (u *usage) compaction(rec protocol.TranscriptRecord) {
	var d protocol.CompactionData
	if json.Unmarshal(rec.Data, &d) != nil {
		return
	}
	if d.ContextWindow > 0 {
		u.used, u.size = d.TokensAfter, d.ContextWindow
	}
	if rec.TurnID == "" && d.Usage.CostUSD > 0 {
		u.cost += d.Usage.CostUSD
		u.priced = true
	}
}

// sendUsage sends a usage_update when what it would say changed since
// the last and the model's window is known.
func (s *session) sendUsage() error {
	if s.usage.size <= 0 || s.usage == s.usageSent {
		return nil
	}
	s.usageSent = s.usage
	u := &sdk.SessionUsageUpdate{Used: s.usage.used, Size: s.usage.size}
	if s.usage.costKnown && s.usage.priced {
		u.Cost = &sdk.Cost{Amount: s.usage.cost, Currency: "USD"}
	}
	return s.send(sdk.SessionUpdate{UsageUpdate: u})
}

// lastUsage takes in the context a session followed without its history
// is at: as the newest page of its transcript leaves it (its last turn's
// end, or a compaction since), else as its last turn, last, says. The
// session's cost stays unknown.
func (s *session) lastUsage(last *protocol.TurnSnapshot) {
	if last != nil {
		s.usage.turn(protocol.TurnUsage{ContextTokens: last.Usage.ContextTokens, ContextWindow: last.Usage.ContextWindow})
	}
	c, err := s.a.hostConn(s.ctx)
	if err != nil {
		return
	}
	page, err := c.TranscriptPage(s.ctx, s.id, client.PageRequest{Direction: client.PageOlder, MaxBytes: protocol.MaxMessageBytes / 2})
	if err != nil {
		return
	}
	for _, rec := range page.Records {
		switch rec.Type {
		case protocol.RecordTurnEnd:
			var d protocol.TurnEndData
			if json.Unmarshal(rec.Data, &d) == nil {
				s.usage.turn(protocol.TurnUsage{ContextTokens: d.Usage.ContextTokens, ContextWindow: d.Usage.ContextWindow})
			}
		case protocol.RecordCompaction:
			s.usage.compaction(rec)
		}
	}
}
