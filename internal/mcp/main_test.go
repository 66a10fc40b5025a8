package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// envServer makes the test binary an MCP server on stdio, of the kind it
// names: "go" (a go-sdk server with the tools below), "hang" (never
// answers initialize) or "malformed" (answers tools/call with a result
// that is not one).
const envServer = "AGENTD_MCP_TEST_SERVER"

// envConformanceClient makes the test binary the client the MCP
// conformance suite drives: agentd's MCP client, given the suite's server
// URL as its last argument and the scenario in MCP_CONFORMANCE_SCENARIO.
const envConformanceClient = "AGENTD_MCP_CONFORMANCE_CLIENT"

func TestMain(m *testing.M) {
	if kind := os.Getenv(envServer); kind != "" {
		os.Exit(serve(kind))
	}
	if os.Getenv(envConformanceClient) != "" {
		os.Exit(conformanceClient(os.Args[len(os.Args)-1], os.Getenv("MCP_CONFORMANCE_SCENARIO")))
	}
	goleak.VerifyTestMain(m)
}

func serve(kind string) int {
	switch kind {
	case "hang":
		fmt.Fprintln(os.Stderr, "hanging at initialize")
		io.Copy(io.Discard, os.Stdin)
		time.Sleep(time.Hour) // its input closed, it still does not go
		return 0
	case "malformed":
		return serveMalformed()
	case "go":
		return serveGo()
	}
	fmt.Fprintf(os.Stderr, "unknown test server %q\n", kind)
	return 2
}

// serveGo is a go-sdk server whose tools misbehave on request.
func serveGo() int {
	fmt.Fprintln(os.Stderr, "test server starting")
	s := mcp.NewServer(&mcp.Implementation{Name: "agentd-test", Version: "1"}, nil)
	type text struct {
		Text string `json:"text" jsonschema:"what to echo"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes text.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in text) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "write", Description: "Pretends to write."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "written"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exits in the middle of the call."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "crashing now")
			os.Exit(3)
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "huge", Description: "Answers 10 MB of text."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("0123456789", 1<<20)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "many", Description: "Answers 1,000 parts of 10 KiB of text and a large structured result."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			res := &mcp.CallToolResult{StructuredContent: map[string]any{"big": strings.Repeat("s", 1<<20)}}
			for range 1000 {
				res.Content = append(res.Content, &mcp.TextContent{Text: strings.Repeat("p", 10<<10)})
			}
			return res, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Reports progress until cancelled."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			for i := 1; ; i++ {
				if tok := req.Params.GetProgressToken(); tok != nil {
					req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Message: fmt.Sprintf("step %d", i)})
				}
				select {
				case <-ctx.Done():
					fmt.Fprintln(os.Stderr, "slow: cancelled")
					return nil, nil, ctx.Err()
				case <-time.After(20 * time.Millisecond):
				}
			}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "grow", Description: "Adds a tool named extra."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(s, &mcp.Tool{Name: "extra", Description: "Added later."},
				func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "extra"}}}, nil, nil
				})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "grown"}}}, nil, nil
		})
	type path struct {
		Path string `json:"path"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "read", Description: "Reads a file."},
		func(_ context.Context, _ *mcp.CallToolRequest, in path) (*mcp.CallToolResult, any, error) {
			b, err := os.ReadFile(in.Path)
			if err != nil {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}, IsError: true}, nil, nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
		})
	type addr struct {
		Addr string `json:"addr"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "dial", Description: "Opens a TCP connection."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addr) (*mcp.CallToolResult, any, error) {
			c, err := net.Dial("tcp", in.Addr)
			if err != nil {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}, IsError: true}, nil, nil
			}
			c.Close()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "connected"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "Answers its environment."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(os.Environ(), "\n")}}}, nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "test server:", err)
	}
	return 0
}

// serveMalformed speaks JSON-RPC by hand: a good initialize and tool list,
// then a tools/call result whose content is not an array.
func serveMalformed() int {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 1<<20)
	out := json.NewEncoder(os.Stdout)
	for sc.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &req) != nil || req.ID == nil {
			continue
		}
		var result any
		switch req.Method {
		case "initialize":
			result = map[string]any{"protocolVersion": req.Params.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "malformed", "version": "1"}}
		case "tools/list":
			result = map[string]any{"tools": []any{map[string]any{"name": "broken", "inputSchema": map[string]any{"type": "object"}}}}
		case "tools/call":
			result = map[string]any{"content": "this is not an array of content", "isError": "maybe"}
		default:
			result = map[string]any{}
		}
		out.Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
	}
	return 0
}
