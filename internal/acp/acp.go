// Package acp serves agentd's sessions to editors over the Agent Client
// Protocol (ACP, protocol version 1): an editor starts `agentd acp` and
// speaks newline-delimited JSON-RPC over its stdin and stdout; this
// package answers as an ACP agent whose sessions are agentd's.
//
// It is a client of the host like every other: each ACP method is mapped
// onto the host's own operations (session.create, turn.start,
// interaction.answer, …) over a connection it is handed a way to open,
// and each session it serves is followed through a session stream that
// reopens across a lost connection or a replaced host. Nothing is kept
// here that the host does not keep: a turn started from an editor runs
// on when the editor goes, and a second editor, `agentd attach` or
// `agentd answer` see and drive the same session.
//
// It knows the public client and the protocol's wire types, never the
// host, the worker or how a host is started (Config.Dial does that).
package acp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

// Config says how Serve reaches agentd.
type Config struct {
	// Dial connects to this home's host, starting one when none runs; it
	// is called again after a lost connection or a hand-off.
	Dial client.DialFunc
	// Version is agentd's version, named to the editor.
	Version string
	// Logger takes the connection's diagnostics; nothing when nil.
	Logger *slog.Logger
}

// Serve answers ACP requests read from in, writing to out, until in ends
// or ctx is cancelled. It closes in and out as it returns, which ends a
// write an editor that stopped reading left blocked, and it returns once
// every goroutine it started has ended. Turns it started run on.
func Serve(ctx context.Context, cfg Config, in io.ReadCloser, out io.WriteCloser) error {
	if cfg.Dial == nil {
		return errors.New("acp: Config.Dial is nil")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	life, stop := context.WithCancelCause(ctx)
	a := &agent{cfg: cfg, life: life, logger: logger, sessions: map[string]*session{}, ready: make(chan struct{})}
	a.out = newBatcher(out)
	// The connection reads from its start, and logs when its reading
	// ends: it reads nothing until its logger is set.
	gate := &gatedReader{r: in, open: make(chan struct{})}
	a.conn = sdk.NewAgentSideConnection(a, a.out, gate)
	a.conn.SetLogger(logger)
	close(gate.open)
	// The connection reads the editor's messages from its start: its
	// handlers may run before it is set.
	close(a.ready)
	select {
	case <-a.conn.Done():
		stop(errors.New("the editor closed its end"))
	case <-ctx.Done():
		stop(context.Cause(ctx))
	}
	// Closing both ends first unblocks what waits on the editor.
	in.Close()
	a.out.Close()
	a.closeAll()
	a.wg.Wait()
	<-a.conn.Done()
	return nil
}

// agent is the ACP agent of one editor connection.
type agent struct {
	cfg    Config                   // constant
	life   context.Context          // constant: ends when the editor goes
	logger *slog.Logger             // constant
	conn   *sdk.AgentSideConnection // constant once ready is closed; read through connection
	ready  chan struct{}            // closed once Serve has set conn
	out    *batcher                 // constant once Serve has set it: what conn writes to

	wg sync.WaitGroup // every goroutine the agent starts

	mu       sync.Mutex
	host     *client.Conn           // guarded by mu: for requests; redialed once it ends
	sessions map[string]*session    // guarded by mu: the sessions this editor has open
	caps     sdk.ClientCapabilities // guarded by mu: what the editor said it can do
}

var (
	_ sdk.Agent       = (*agent)(nil)
	_ sdk.AgentLoader = (*agent)(nil)
)

// connection returns the connection to the editor, once Serve has set it.
func (a *agent) connection() *sdk.AgentSideConnection {
	<-a.ready
	return a.conn
}

// hostConn returns the connection requests go on, dialing one when none
// is open.
func (a *agent) hostConn(ctx context.Context) (*client.Conn, error) {
	a.mu.Lock()
	c := a.host
	a.mu.Unlock()
	if c != nil && c.Err() == nil {
		return c, nil
	}
	c, err := a.cfg.Dial(ctx)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.host != nil && a.host.Err() == nil {
		c.Close()
		return a.host, nil
	}
	if a.host != nil {
		a.host.Close()
	}
	a.host = c
	return c, nil
}

// call runs operation o on the host, dialing once more when the
// connection was lost before the request was dispatched or when a query
// was cut off.
func call[In, Out any](ctx context.Context, a *agent, o protocol.Op[In, Out], in In) (Out, error) {
	c, err := a.hostConn(ctx)
	if err != nil {
		var zero Out
		return zero, err
	}
	out, err := client.Call(ctx, c, o, in)
	var cut *client.InterruptedError
	if errors.As(err, &cut) && cut.Retryable {
		if c, err = a.hostConn(ctx); err != nil {
			return out, err
		}
		out, err = client.Call(ctx, c, o, in)
	}
	return out, err
}

// closeAll stops following every open session and closes the host
// connection.
func (a *agent) closeAll() {
	a.mu.Lock()
	open := make([]*session, 0, len(a.sessions))
	for _, s := range a.sessions {
		open = append(open, s)
	}
	a.sessions = map[string]*session{}
	c := a.host
	a.host = nil
	a.mu.Unlock()
	for _, s := range open {
		s.close()
	}
	if c != nil {
		c.Close()
	}
}

// Initialize advertises what agentd does: loading, listing, resuming and
// closing sessions, prompts of text and embedded text, and an editor's
// MCP servers over stdio, streamable HTTP and SSE.
func (a *agent) Initialize(_ context.Context, p sdk.InitializeRequest) (sdk.InitializeResponse, error) {
	a.mu.Lock()
	a.caps = p.ClientCapabilities
	a.mu.Unlock()
	return sdk.InitializeResponse{
		ProtocolVersion: sdk.ProtocolVersionNumber,
		AgentInfo:       &sdk.Implementation{Name: "agentd", Title: sdk.Ptr("agentd"), Version: a.cfg.Version},
		AgentCapabilities: sdk.AgentCapabilities{
			LoadSession:        true,
			PromptCapabilities: sdk.PromptCapabilities{EmbeddedContext: true},
			McpCapabilities:    mcpCapabilities,
			SessionCapabilities: sdk.SessionCapabilities{
				List:   &sdk.SessionListCapabilities{},
				Resume: &sdk.SessionResumeCapabilities{},
				Close:  &sdk.SessionCloseCapabilities{},
			},
		},
		// agentd's providers take their keys from `agentd auth` or the
		// host's environment, never from an editor.
		AuthMethods: []sdk.AuthMethod{},
	}, nil
}

// Authenticate is refused: keys are set with `agentd auth`. The error
// says which providers have one.
func (a *agent) Authenticate(ctx context.Context, p sdk.AuthenticateRequest) (sdk.AuthenticateResponse, error) {
	models, err := call(ctx, a, protocol.OpModelsList, protocol.ModelsListInput{})
	if err != nil {
		return sdk.AuthenticateResponse{}, hostError(err)
	}
	msg := fmt.Sprintf("methodId %q: agentd offers no authentication methods; a provider's key is set with `agentd auth`.", p.MethodId)
	for _, pr := range models.Providers {
		switch {
		case pr.KeySource != "":
			msg += fmt.Sprintf(" %s: key from the %s.", pr.Name, pr.KeySource)
		case pr.Configured:
			msg += fmt.Sprintf(" %s: needs no key.", pr.Name)
		default:
			msg += fmt.Sprintf(" %s: no key.", pr.Name)
		}
	}
	return sdk.AuthenticateResponse{}, invalidParams("%s", msg)
}

// Logout is refused for the same reason as Authenticate.
func (a *agent) Logout(context.Context, sdk.LogoutRequest) (sdk.LogoutResponse, error) {
	return sdk.LogoutResponse{}, invalidParams("agentd offers no authentication methods: a provider's key is removed with `agentd auth`")
}

// invalidParams is an ACP invalid-params error whose message is msg.
func invalidParams(format string, args ...any) *sdk.RequestError {
	return &sdk.RequestError{Code: -32602, Message: fmt.Sprintf(format, args...)}
}

// hostError turns an error of the host into an ACP error: the host's own
// message, with a code an editor can act on.
func hostError(err error) error {
	var re *sdk.RequestError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &re):
		return re
	case errors.Is(err, client.ErrNotFound), errors.Is(err, client.ErrInvalidRequest):
		return &sdk.RequestError{Code: -32602, Message: err.Error()}
	}
	return &sdk.RequestError{Code: -32603, Message: err.Error()}
}

// newID returns a random id with prefix.
func newID(prefix string) string {
	b := make([]byte, 8)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// gatedReader reads from r once open is closed.
type gatedReader struct {
	r    io.Reader
	open chan struct{}
}

func (g *gatedReader) Read(p []byte) (int, error) {
	<-g.open
	return g.r.Read(p)
}
