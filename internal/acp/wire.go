package acp

import (
	"encoding/json"

	sdk "github.com/coder/acp-go-sdk"
)

// The SDK encodes a session/update through its union types in three
// passes (the variant, a map of it, the map) and the message around it in
// a fourth; a session/load of a long session sends thousands. The
// updates pump sends most are encoded here in one pass, into the same
// wire shape, and written to the same writer as the SDK's messages, a
// whole line at a time; the rest go through the SDK.

// notification is a session/update message.
type notification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  struct {
		SessionID string `json:"sessionId"`
		Update    any    `json:"update"`
	} `json:"params"`
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type chunkUpdate struct {
	SessionUpdate string    `json:"sessionUpdate"`
	Content       textBlock `json:"content"`
}

type toolContent struct {
	Type    string     `json:"type"`
	Content *textBlock `json:"content,omitempty"`
	Path    string     `json:"path,omitempty"`
	OldText *string    `json:"oldText,omitempty"`
	NewText *string    `json:"newText,omitempty"`
}

type location struct {
	Path string `json:"path"`
}

type toolUpdate struct {
	SessionUpdate string        `json:"sessionUpdate"`
	ToolCallID    string        `json:"toolCallId"`
	Title         *string       `json:"title,omitempty"`
	Kind          *string       `json:"kind,omitempty"`
	Status        *string       `json:"status,omitempty"`
	RawInput      any           `json:"rawInput,omitempty"`
	Locations     []location    `json:"locations,omitempty"`
	Content       []toolContent `json:"content,omitempty"`
}

// wire returns u in its wire shape, or nil for an update left to the SDK.
func wire(u sdk.SessionUpdate) any {
	text := func(kind string, c sdk.ContentBlock) any {
		if c.Text == nil {
			return nil
		}
		return chunkUpdate{SessionUpdate: kind, Content: textBlock{Type: "text", Text: c.Text.Text}}
	}
	switch {
	case u.UserMessageChunk != nil:
		return text("user_message_chunk", u.UserMessageChunk.Content)
	case u.AgentMessageChunk != nil:
		return text("agent_message_chunk", u.AgentMessageChunk.Content)
	case u.AgentThoughtChunk != nil:
		return text("agent_thought_chunk", u.AgentThoughtChunk.Content)
	case u.ToolCall != nil:
		c := u.ToolCall
		title, kind, status := c.Title, string(c.Kind), string(c.Status)
		return tool("tool_call", c.ToolCallId, &title, &kind, &status, c.RawInput, c.Locations, c.Content)
	case u.ToolCallUpdate != nil:
		c := u.ToolCallUpdate
		var kind, status *string
		if c.Kind != nil {
			kind = (*string)(c.Kind)
		}
		if c.Status != nil {
			status = (*string)(c.Status)
		}
		return tool("tool_call_update", c.ToolCallId, c.Title, kind, status, c.RawInput, c.Locations, c.Content)
	}
	return nil
}

func tool(kind string, id sdk.ToolCallId, title, toolKind, status *string, input any, locs []sdk.ToolCallLocation, content []sdk.ToolCallContent) any {
	w := toolUpdate{SessionUpdate: kind, ToolCallID: string(id), Title: title, Kind: toolKind, Status: status, RawInput: input}
	for _, l := range locs {
		w.Locations = append(w.Locations, location{Path: l.Path})
	}
	for _, c := range content {
		switch {
		case c.Content != nil && c.Content.Content.Text != nil:
			w.Content = append(w.Content, toolContent{Type: "content", Content: &textBlock{Type: "text", Text: c.Content.Content.Text.Text}})
		case c.Diff != nil:
			w.Content = append(w.Content, toolContent{Type: "diff", Path: c.Diff.Path, OldText: c.Diff.OldText, NewText: &c.Diff.NewText})
		default:
			return nil
		}
	}
	return w
}

// line encodes a session/update of session id carrying update, with its
// newline.
func line(id string, update any) ([]byte, error) {
	n := notification{JSONRPC: "2.0", Method: sdk.ClientMethodSessionUpdate}
	n.Params.SessionID, n.Params.Update = id, update
	b, err := json.Marshal(n)
	return append(b, '\n'), err
}
