package acp_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/acp"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/protocol"
)

// noClient is an editor that offers nothing but reading updates.
type noClient struct{ sdk.Client }

func (noClient) SessionUpdate(context.Context, sdk.SessionNotification) error { return nil }

// serve runs Serve against a real host over pipes, and returns the
// editor's end and what Serve returns.
func serve(t *testing.T, ctx context.Context) (*sdk.ClientSideConnection, io.Closer, <-chan error) {
	h := agentdtest.NewHost(t, agentdtest.Options{})
	dial := func(ctx context.Context) (*client.Conn, error) {
		return client.Dial(ctx, h.Endpoint(), client.Options{Surface: protocol.SurfaceACP})
	}
	toAgent, fromEditor := io.Pipe()
	toEditor, fromAgent := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- acp.Serve(ctx, acp.Config{Dial: dial, Version: "test"}, toAgent, fromAgent) }()
	editor := sdk.NewClientSideConnection(noClient{}, fromEditor, toEditor)
	editor.SetLogger(slog.New(slog.DiscardHandler))
	t.Cleanup(func() {
		fromEditor.Close()
		toEditor.Close()
		<-editor.Done()
	})
	return editor, fromEditor, served
}

func TestServeEndsWhenTheEditorClosesItsEnd(t *testing.T) {
	editor, end, served := serve(t, context.Background())
	ctx := agentdtest.Context(t)
	init, err := editor.Initialize(ctx, sdk.InitializeRequest{ProtocolVersion: sdk.ProtocolVersionNumber})
	if err != nil {
		t.Fatal(err)
	}
	caps := init.AgentCapabilities
	if !caps.LoadSession || caps.SessionCapabilities.List == nil || caps.SessionCapabilities.Resume == nil || caps.SessionCapabilities.Close == nil {
		t.Errorf("capabilities: %+v", caps)
	}
	if caps.PromptCapabilities.Image || caps.PromptCapabilities.Audio || caps.McpCapabilities.Acp {
		t.Errorf("capabilities agentd does not have: %+v", caps)
	}
	if !caps.McpCapabilities.Http || !caps.McpCapabilities.Sse {
		t.Errorf("MCP transports agentd runs an editor's servers over are not advertised: %+v", caps.McpCapabilities)
	}
	if _, err := editor.Prompt(ctx, sdk.PromptRequest{SessionId: "nosuch", Prompt: []sdk.ContentBlock{sdk.TextBlock("hi")}}); err == nil || !strings.Contains(err.Error(), "sessionId") {
		t.Errorf("a prompt for no session: %v", err)
	}
	end.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(agentdtest.Timeout):
		t.Fatal("Serve went on after the editor closed its end")
	}
}

func TestServeEndsWithItsContextThoughTheEditorReadsNothing(t *testing.T) {
	h := agentdtest.NewHost(t, agentdtest.Options{})
	dial := func(ctx context.Context) (*client.Conn, error) {
		return client.Dial(ctx, h.Endpoint(), client.Options{Surface: protocol.SurfaceACP})
	}
	toAgent, fromEditor := io.Pipe()
	unread, fromAgent := io.Pipe()
	defer unread.Close()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- acp.Serve(ctx, acp.Config{Dial: dial, Version: "test"}, toAgent, fromAgent) }()
	// The answer has nowhere to go: nobody reads unread.
	io.WriteString(fromEditor, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`+"\n")
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(agentdtest.Timeout):
		t.Fatal("Serve went on after its context ended")
	}
	fromEditor.Close()
}

func TestServeRefusesAConfigWithoutDial(t *testing.T) {
	err := acp.Serve(context.Background(), acp.Config{}, io.NopCloser(strings.NewReader("")), nopWriter{})
	if err == nil || !strings.Contains(err.Error(), "Dial") {
		t.Fatalf("Serve without Dial: %v", err)
	}
}

type nopWriter struct{}

func (nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (nopWriter) Close() error                { return nil }
