package protocol

import (
	"bytes"
	"encoding/json"
)

// MCPListResult is the result of session.mcp.list.
type MCPListResult struct {
	// Servers are the session's MCP servers, by name.
	Servers []MCPServer `json:"servers"`
}

// MCPServer is one MCP server of a session, as its worker runs it.
type MCPServer struct {
	// Name names the server; its tools reach the agent as
	// mcp__<name>__<tool>.
	Name string `json:"name"`
	// Transport is stdio or http.
	Transport string `json:"transport"`
	// Scope is where it was configured: user (agentd mcp add), project
	// (a trusted .mcp.json) or plugin (a plugin package's .mcp.json).
	Scope string `json:"scope"`
	// Source is the file, or the plugin package's directory.
	Source string `json:"source"`
	// Ref is its runtime resource's ref (mcp-N), whose log holds its
	// stderr.
	Ref string `json:"ref,omitempty"`
	// Status is ServiceStarting, ServiceReady, ServiceFailed or
	// ServiceStopped; Detail says why it failed.
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Tools are its tools once it is ready.
	Tools []MCPTool `json:"tools"`
}

// MCPTool is one tool of an MCP server.
type MCPTool struct {
	// Name is the tool's name on its server, which session.tool.call
	// takes.
	Name string `json:"name"`
	// AgentName is the name the agent calls it by.
	AgentName   string `json:"agentName"`
	Description string `json:"description,omitempty"`
	// ReadOnly is its readOnlyHint: it runs under the read-only approval
	// policy.
	ReadOnly bool `json:"readOnly,omitempty"`
	// InputSchema is the JSON Schema of its arguments, as the server
	// gave it.
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
}

// ToolCallInput is the input of session.tool.call: a client calls a tool
// of one of the session's MCP servers, through the host.
type ToolCallInput struct {
	SessionID string `json:"sessionId"`
	// Server is the MCP server's name and Tool the tool's name on it.
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// Arguments is a JSON object; absent means none.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Validate checks the input.
func (in *ToolCallInput) Validate() error {
	if err := requireString("input.sessionId", in.SessionID); err != nil {
		return err
	}
	if err := requireString("input.server", in.Server); err != nil {
		return err
	}
	if err := requireString("input.tool", in.Tool); err != nil {
		return err
	}
	if a := bytes.TrimSpace(in.Arguments); len(a) > 0 && a[0] != '{' && string(a) != "null" {
		return FieldError("input.arguments", "must be a JSON object")
	}
	return nil
}

// SessionRef implements SessionScoped.
func (in *ToolCallInput) SessionRef() *string { return &in.SessionID }

// ToolCallResult is the result of session.tool.call, bounded: the text as
// the agent would read it, and the content's parts without their data.
type ToolCallResult struct {
	// Text is the result as the agent reads it, at most 64 KiB.
	Text string `json:"text"`
	// IsError marks a result the tool reported as an error.
	IsError bool         `json:"isError,omitempty"`
	Content []MCPContent `json:"content"`
	// StructuredContent is the tool's structured result, when it gave one
	// of at most 64 KiB.
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
}

// MCPContent is one part of an MCP tool's result, without its data.
type MCPContent struct {
	// Type is text, image, audio, resource_link or resource.
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	MIMEType string `json:"mimeType,omitempty"`
	URI      string `json:"uri,omitempty"`
	Name     string `json:"name,omitempty"`
	// Bytes is the size of an image's, audio's or blob's data.
	Bytes int `json:"bytes,omitempty"`
}
