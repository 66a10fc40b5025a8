package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/tools"
	"github.com/agentd-dev/agentd/protocol"
)

// Bounds of what a tool call gives back.
const (
	// MaxResultBytes bounds a result's text, for the model and the
	// transcript; a longer one is cut, saying so.
	MaxResultBytes = 64 << 10
	// maxStructuredBytes bounds the structured content passed on as it is.
	maxStructuredBytes = 64 << 10
	// maxProgressBytes bounds one progress message.
	maxProgressBytes = 1 << 10
	// maxToolName is the longest tool name models take.
	maxToolName = 64
	// maxDescription bounds a tool's description offered to the model.
	maxDescription = 4 << 10
)

// ToolPrefix starts the name of every MCP tool the agent sees.
const ToolPrefix = "mcp__"

// ToolName returns the name the agent calls a server's tool by:
// mcp__<server>__<tool>, the tool's name made fit for a model.
func ToolName(server, tool string) string {
	return ToolPrefix + server + "__" + toolPart(tool)
}

// toolPart maps what a model's tool name cannot hold to _.
func toolPart(tool string) string {
	b := []byte(tool)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// Tools returns the tools of every server, as the agent calls them,
// waiting for servers still starting until ctx ends. A server that failed
// offers none; its failure is in its resource and the log.
func (ss *Servers) Tools(ctx context.Context) []tools.Tool {
	var out []tools.Tool
	for _, sv := range ss.servers() {
		if _, err := sv.ready(ctx); err != nil {
			continue
		}
		sv.mu.Lock()
		list := sv.tools
		sv.mu.Unlock()
		seen := map[string]bool{}
		for _, t := range list {
			name := ToolName(sv.cfg.Name, t.Name)
			if len(name) > maxToolName || seen[name] {
				ss.opts.Logger.Warn("an MCP tool is left out: its name is too long for a model or taken", "server", sv.cfg.Name, "tool", t.Name)
				continue
			}
			seen[name] = true
			out = append(out, &tool{sv: sv, def: t, name: name})
		}
	}
	return out
}

// tool is one MCP tool as the agent sees it.
type tool struct {
	sv   *server
	def  *mcp.Tool
	name string
}

func (t *tool) Spec() llm.ToolSpec {
	params, err := json.Marshal(t.def.InputSchema)
	if err != nil || t.def.InputSchema == nil {
		params = json.RawMessage(`{"type":"object"}`)
	}
	desc := t.def.Description
	if desc == "" {
		desc = t.def.Title
	}
	if desc == "" {
		desc = fmt.Sprintf("The %s tool of the MCP server %s.", t.def.Name, t.sv.cfg.Name)
	}
	return llm.ToolSpec{Name: t.name, Description: cut(desc, maxDescription), Parameters: params}
}

// ReadOnly is the tool's readOnlyHint: such a tool runs under the
// read-only approval policy; every other asks under ask.
func (t *tool) ReadOnly() bool { return t.def.Annotations != nil && t.def.Annotations.ReadOnlyHint }

func (t *tool) Run(ctx context.Context, env *tools.Env, args json.RawMessage) tools.Result {
	var progress func(string)
	if env != nil {
		progress = env.Progress
	}
	res, err := t.sv.s.call(ctx, t.sv, t.def.Name, args, progress)
	if err != nil {
		return tools.Result{Content: t.name + ": " + err.Error(), IsError: true}
	}
	return tools.Result{Content: res.Text, IsError: res.IsError}
}

// Result is a tool call's answer, bounded.
type Result struct {
	// Text is the result as the model reads it: text as it is, other
	// content described, structured content as JSON; at most
	// MaxResultBytes.
	Text    string
	IsError bool
	// Content lists the result's parts, without their data.
	Content []protocol.MCPContent
	// Structured is the structured content, when small enough.
	Structured json.RawMessage
}

// Call calls a server's tool by its own name, as a client of the session
// asks through the host; progress (nil: none) gets each progress message.
func (ss *Servers) Call(ctx context.Context, server, toolName string, args json.RawMessage, progress func(string)) (Result, error) {
	sv, ok := ss.lookup(server)
	if !ok {
		return Result{}, fmt.Errorf("%w: %q (the session's servers: %s)", ErrUnknownServer, server, strings.Join(ss.names(), ", "))
	}
	return ss.call(ctx, sv, toolName, args, progress)
}

func (ss *Servers) names() []string {
	order := ss.servers()
	names := make([]string, len(order))
	for i, sv := range order {
		names[i] = sv.cfg.Name
	}
	return names
}

// call calls a tool, progress passed on until it returns.
func (ss *Servers) call(ctx context.Context, sv *server, name string, args json.RawMessage, progress func(string)) (Result, error) {
	cs, err := sv.ready(ctx)
	if err != nil {
		return Result{}, err
	}
	arguments := map[string]any{}
	if len(args) > 0 && string(args) != "null" {
		if err := json.Unmarshal(args, &arguments); err != nil || arguments == nil {
			return Result{}, errors.New("arguments must be a JSON object")
		}
	}
	params := &mcp.CallToolParams{Name: name, Arguments: arguments}
	if progress != nil {
		token := ss.tokenFor()
		params.SetProgressToken(token)
		var mu sync.Mutex
		done := false
		sv.mu.Lock()
		sv.progress[token] = func(p *mcp.ProgressNotificationParams) {
			mu.Lock()
			defer mu.Unlock()
			if !done {
				progress(progressLine(p))
			}
		}
		sv.mu.Unlock()
		defer func() {
			sv.mu.Lock()
			delete(sv.progress, token)
			sv.mu.Unlock()
			mu.Lock()
			done = true
			mu.Unlock()
		}()
	}
	res, err := cs.CallTool(ctx, params)
	switch {
	case ctx.Err() != nil:
		return Result{}, fmt.Errorf("interrupted: the call to MCP server %s was cancelled", sv.cfg.Name)
	case err != nil:
		sv.mu.Lock()
		failed := sv.failed
		sv.mu.Unlock()
		if failed != nil {
			return Result{}, fmt.Errorf("MCP server %s %w (while calling %s: %v)", sv.cfg.Name, describe(failed), name, err)
		}
		return Result{}, fmt.Errorf("MCP server %s failed the call: %v", sv.cfg.Name, err)
	case res == nil:
		return Result{}, fmt.Errorf("MCP server %s answered no result", sv.cfg.Name)
	}
	return render(res), nil
}

// progressLine words a progress notification as a line of tool output.
func progressLine(p *mcp.ProgressNotificationParams) string {
	var b strings.Builder
	b.WriteString("progress ")
	b.WriteString(strconv.FormatFloat(p.Progress, 'f', -1, 64))
	if p.Total > 0 {
		b.WriteString("/" + strconv.FormatFloat(p.Total, 'f', -1, 64))
	}
	if p.Message != "" {
		b.WriteString(": " + cut(p.Message, maxProgressBytes))
	}
	b.WriteString("\n")
	return b.String()
}

// maxParts bounds the parts of a result a client is told of.
const maxParts = 256

// render turns a result into what the model reads and what a client is
// told, bounded: the text, the parts' texts together and the structured
// content each at most 64 KiB, and at most maxParts parts, so that a
// result always fits in a frame.
func render(res *mcp.CallToolResult) Result {
	out := Result{IsError: res.IsError, Content: []protocol.MCPContent{}}
	var b strings.Builder
	line := func(s string) {
		if b.Len() > MaxResultBytes {
			return // cut below anyway
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(s)
	}
	budget := MaxResultBytes // for the parts' texts together
	part := func(c protocol.MCPContent) {
		if len(out.Content) >= maxParts {
			return
		}
		if len(c.Text) > budget {
			c.Text = cut(c.Text, max(budget, 64))
		}
		budget = max(0, budget-len(c.Text))
		out.Content = append(out.Content, c)
	}
	texts := map[string]bool{}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			line(c.Text)
			if len(texts) < maxParts {
				texts[strings.TrimSpace(c.Text)] = true
			}
			part(protocol.MCPContent{Type: "text", Text: c.Text})
		case *mcp.ImageContent:
			line(fmt.Sprintf("[image: %s, %d bytes]", c.MIMEType, len(c.Data)))
			part(protocol.MCPContent{Type: "image", MIMEType: c.MIMEType, Bytes: len(c.Data)})
		case *mcp.AudioContent:
			line(fmt.Sprintf("[audio: %s, %d bytes]", c.MIMEType, len(c.Data)))
			part(protocol.MCPContent{Type: "audio", MIMEType: c.MIMEType, Bytes: len(c.Data)})
		case *mcp.ResourceLink:
			desc := fmt.Sprintf("[resource link: %s <%s>", c.Name, c.URI)
			if c.MIMEType != "" {
				desc += " " + c.MIMEType
			}
			if c.Description != "" {
				desc += ": " + c.Description
			}
			line(desc + "]")
			part(protocol.MCPContent{Type: "resource_link", URI: cut(c.URI, 4<<10), Name: cut(c.Name, 1<<10), MIMEType: c.MIMEType})
		case *mcp.EmbeddedResource:
			if c.Resource == nil {
				continue
			}
			r := c.Resource
			if r.Text != "" {
				line(fmt.Sprintf("[resource <%s>]\n%s", r.URI, r.Text))
			} else {
				line(fmt.Sprintf("[resource <%s>: %s, %d bytes]", r.URI, r.MIMEType, len(r.Blob)))
			}
			part(protocol.MCPContent{Type: "resource", URI: cut(r.URI, 4<<10), MIMEType: r.MIMEType, Text: r.Text, Bytes: len(r.Blob)})
		default:
			line(fmt.Sprintf("[content of type %T]", c))
		}
	}
	if n := len(res.Content) - len(out.Content); n > 0 && len(out.Content) == maxParts {
		line(fmt.Sprintf("… (%d more parts left out)", n))
	}
	if res.StructuredContent != nil {
		if raw, err := json.Marshal(res.StructuredContent); err == nil {
			if !texts[string(raw)] && !jsonAmong(raw, texts) {
				line("structured content: " + string(raw))
			}
			if len(raw) <= maxStructuredBytes {
				out.Structured = raw
			}
		}
	}
	out.Text = cut(b.String(), MaxResultBytes)
	return out
}

// jsonAmong reports whether one of the texts is the JSON raw is.
func jsonAmong(raw []byte, texts map[string]bool) bool {
	var want any
	if json.Unmarshal(raw, &want) != nil {
		return false
	}
	norm, _ := json.Marshal(want)
	for t := range texts {
		var v any
		if json.Unmarshal([]byte(t), &v) == nil {
			if got, _ := json.Marshal(v); string(got) == string(norm) {
				return true
			}
		}
	}
	return false
}

// cut returns s cut to at most n bytes, on a character's boundary,
// saying how much was left out.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	note := fmt.Sprintf("\n… (%d bytes more left out)", len(s)-n)
	keep := n - len(note)
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + note
}

// List describes each server and its tools, as the session's clients see
// them.
func (ss *Servers) List() []protocol.MCPServer {
	out := []protocol.MCPServer{}
	for _, sv := range ss.servers() {
		info := protocol.MCPServer{
			Name: sv.cfg.Name, Transport: sv.cfg.Transport, Scope: sv.cfg.Scope, Source: sv.cfg.Source,
			Status: protocol.ServiceStarting, Tools: []protocol.MCPTool{},
		}
		if sv.svc != nil {
			info.Ref = sv.svc.Ref()
		}
		select {
		case <-sv.started:
			sv.mu.Lock()
			if sv.failed != nil {
				info.Status, info.Detail = protocol.ServiceFailed, sv.failed.Error()
			} else {
				info.Status = protocol.ServiceReady
			}
			for _, t := range sv.tools {
				schema, _ := json.Marshal(t.InputSchema)
				info.Tools = append(info.Tools, protocol.MCPTool{
					Name: t.Name, AgentName: ToolName(sv.cfg.Name, t.Name), Description: cut(t.Description, maxDescription),
					ReadOnly: t.Annotations != nil && t.Annotations.ReadOnlyHint, InputSchema: schema,
				})
			}
			sv.mu.Unlock()
		default:
		}
		out = append(out, info)
	}
	return out
}
