package worker

import (
	"github.com/agentd-dev/agentd/internal/agent"
	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/protocol"
)

// messageData is m as the transcript records it. The record's shape is
// the protocol's, so a change inside llm cannot change what is on disk
// or on the wire.
func messageData(m llm.Message) protocol.MessageData {
	d := protocol.MessageData{Role: m.Role, Parts: make([]protocol.MessagePart, 0, len(m.Parts))}
	for _, p := range m.Parts {
		mp := protocol.MessagePart{Type: p.Type, Text: p.Text, Signature: p.Signature}
		if c := p.ToolCall; c != nil {
			mp.ToolCall = &protocol.ToolCallPart{ID: c.ID, Name: c.Name, Arguments: c.Arguments}
		}
		if r := p.ToolResult; r != nil {
			mp.ToolResult = &protocol.ToolResultPart{CallID: r.CallID, Name: r.Name, Content: r.Content, IsError: r.IsError}
		}
		d.Parts = append(d.Parts, mp)
	}
	return d
}

// message is the conversation's message of a recorded one.
func message(d protocol.MessageData) llm.Message {
	m := llm.Message{Role: d.Role, Parts: make([]llm.Part, 0, len(d.Parts))}
	for _, p := range d.Parts {
		lp := llm.Part{Type: p.Type, Text: p.Text, Signature: p.Signature}
		if c := p.ToolCall; c != nil {
			lp.ToolCall = &llm.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments}
		}
		if r := p.ToolResult; r != nil {
			lp.ToolResult = &llm.ToolResult{CallID: r.CallID, Name: r.Name, Content: r.Content, IsError: r.IsError}
		}
		m.Parts = append(m.Parts, lp)
	}
	return m
}

// instructionRecords lists the instruction files a turn's start records.
func instructionRecords(in agent.Instructions) []protocol.InstructionFile {
	var out []protocol.InstructionFile
	for _, f := range in {
		out = append(out, protocol.InstructionFile{Path: f.Path, Bytes: len(f.Text), Truncated: f.Truncated})
	}
	return out
}

// usageLocked is the usage t's snapshot and end record carry: its calls'
// usage, with the context they last saw and the model's window.
func (t *turn) usageLocked() protocol.TurnUsage {
	u := turnUsage(t.calls, t.usage)
	if u != (protocol.TurnUsage{}) {
		u.ContextTokens, u.ContextWindow = t.context, t.window
	}
	return u
}

// turnUsage is the usage a turn's snapshot and end record carry: none
// while no call has reported any.
func turnUsage(calls int, u llm.Usage) protocol.TurnUsage {
	if u.IsZero() && !u.Priced {
		return protocol.TurnUsage{}
	}
	out := protocol.TurnUsage{
		ModelCalls: calls, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens,
	}
	if u.Priced {
		out.CostUSD = u.Cost
	}
	return out
}
