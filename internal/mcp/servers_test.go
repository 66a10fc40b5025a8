package mcp_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/internal/mcp"
	"github.com/agentd-dev/agentd/internal/resource"
	"github.com/agentd-dev/agentd/internal/tools"
	"github.com/agentd-dev/agentd/protocol"
)

// testServer is the test binary as an MCP server of the kind named.
func testServer(name, kind string) mcp.Server {
	return mcp.Server{Name: name, Transport: mcp.TransportStdio, Command: os.Args[0], Env: map[string]string{envServer: kind}, Scope: mcp.ScopeUser, Trusted: true}
}

// place is a session's MCP servers over a real resource Manager.
type place struct {
	servers *mcp.Servers
	res     *resource.Manager
}

func start(t *testing.T, opts mcp.Options, servers ...mcp.Server) *place {
	t.Helper()
	dir := t.TempDir()
	res := resource.New(resource.Config{SessionID: "s1", Dir: filepath.Join(dir, "resources"), Admit: func() (string, error) { return dir, nil }})
	opts.Resources, opts.Dir = res, dir
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	ss := mcp.Start(servers, opts)
	t.Cleanup(func() {
		ss.Close()
		res.Close()
	})
	return &place{servers: ss, res: res}
}

// tool finds a tool by the name the agent calls it.
func (p *place) tool(t *testing.T, name string) tools.Tool {
	t.Helper()
	for _, tl := range p.servers.Tools(context.Background()) {
		if tl.Spec().Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}

// resourceOf returns the runtime resource of a server.
func (p *place) resourceOf(t *testing.T, name string) protocol.Resource {
	t.Helper()
	q, err := p.res.Query(protocol.ResourceQueryInput{SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range q.Resources {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no resource of server %s in %+v", name, q.Resources)
	return protocol.Resource{}
}

func run(tl tools.Tool, args string) tools.Result {
	return tl.Run(context.Background(), &tools.Env{}, json.RawMessage(args))
}

func TestToolsJoinWithServerPrefixedNamesSchemasAndReadOnlyHints(t *testing.T) {
	p := start(t, mcp.Options{}, testServer("go", "go"))
	var names []string
	for _, tl := range p.servers.Tools(context.Background()) {
		names = append(names, tl.Spec().Name)
	}
	for _, want := range []string{"mcp__go__echo", "mcp__go__write", "mcp__go__crash", "mcp__go__slow"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools %v lack %s", names, want)
		}
	}
	echo := p.tool(t, "mcp__go__echo")
	if !echo.ReadOnly() || p.tool(t, "mcp__go__write").ReadOnly() {
		t.Errorf("readOnlyHint decides ReadOnly: echo %v, write %v", echo.ReadOnly(), p.tool(t, "mcp__go__write").ReadOnly())
	}
	var schema struct {
		Properties map[string]struct {
			Type        string `json:"type"`
			Description string `json:"description"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(echo.Spec().Parameters, &schema); err != nil || schema.Properties["text"].Description != "what to echo" {
		t.Errorf("the schema is passed as the server gave it: %s", echo.Spec().Parameters)
	}
	if res := run(echo, `{"text":"hi"}`); res.IsError || res.Content != "echo: hi" {
		t.Errorf("echo answered %+v", res)
	}
	r := p.resourceOf(t, "go")
	if r.Kind != protocol.ResourceMCP || r.State != protocol.ResourceRunning || r.Status != protocol.ServiceReady {
		t.Errorf("the server's resource: %+v", r)
	}
	poll.Until(t, "the server's stderr in its resource's output", func() bool {
		out, _, _ := p.res.Output(r.Ref)
		return strings.Contains(string(out), "test server starting")
	})
}

func TestServerCrashingMidCallFailsThatCallOnly(t *testing.T) {
	p := start(t, mcp.Options{}, testServer("go", "go"), testServer("other", "go"))
	res := run(p.tool(t, "mcp__go__crash"), `{}`)
	if !res.IsError || !strings.Contains(res.Content, "MCP server go") {
		t.Fatalf("a crash mid-call answered %+v", res)
	}
	poll.Until(t, "the crashed server's resource to end", func() bool {
		return p.resourceOf(t, "go").State == protocol.ResourceExited
	})
	r := p.resourceOf(t, "go")
	if r.ExitCode == nil || *r.ExitCode != 3 || r.Status != protocol.ServiceFailed {
		t.Errorf("the crashed server's resource: %+v", r)
	}
	out, _, _ := p.res.Output(r.Ref)
	if !strings.Contains(string(out), "crashing now") {
		t.Errorf("its stderr is its resource's output: %q", out)
	}
	// Its next call fails at once, saying why; the other server answers.
	if _, err := p.servers.Call(context.Background(), "go", "echo", json.RawMessage(`{"text":"x"}`), nil); err == nil || !strings.Contains(err.Error(), "ended") {
		t.Errorf("a call to the crashed server: %v", err)
	}
	if res := run(p.tool(t, "mcp__other__echo"), `{"text":"still"}`); res.IsError || res.Content != "echo: still" {
		t.Errorf("the other server answered %+v", res)
	}
}

func TestServerHangingAtInitializeFailsItsCallsOnly(t *testing.T) {
	// The short start timeout is the hanging server's alone: a loaded
	// machine may take longer to start the other.
	stuck := start(t, mcp.Options{StartTimeout: 200 * time.Millisecond}, testServer("stuck", "hang"))
	p := start(t, mcp.Options{}, testServer("go", "go"))
	_, err := stuck.servers.Call(context.Background(), "stuck", "anything", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "did not finish starting") {
		t.Fatalf("a call to a server hanging at initialize: %v", err)
	}
	if tools := stuck.servers.Tools(context.Background()); len(tools) != 0 {
		t.Errorf("a server that did not start offers tools: %v", tools)
	}
	if res := run(p.tool(t, "mcp__go__echo"), `{"text":"ok"}`); res.IsError {
		t.Errorf("the other server: %+v", res)
	}
	poll.Until(t, "the hanging server's resource to end, killed", func() bool {
		return stuck.resourceOf(t, "stuck").State == protocol.ResourceExited
	})
	if r := stuck.resourceOf(t, "stuck"); r.Status != protocol.ServiceFailed || !strings.Contains(r.Detail, "did not finish starting") {
		t.Errorf("the hanging server's resource: %+v", r)
	}
}

func TestMalformedResultFailsTheCallWithAClearError(t *testing.T) {
	p := start(t, mcp.Options{}, testServer("bad", "malformed"))
	res := run(p.tool(t, "mcp__bad__broken"), `{}`)
	if !res.IsError || !strings.Contains(res.Content, "mcp__bad__broken: MCP server bad") {
		t.Fatalf("a malformed result answered %+v", res)
	}
}

func TestHugeResultIsBounded(t *testing.T) {
	p := start(t, mcp.Options{}, testServer("go", "go"))
	res := run(p.tool(t, "mcp__go__huge"), `{}`)
	if res.IsError || len(res.Content) > mcp.MaxResultBytes || !strings.Contains(res.Content, "bytes more left out") {
		t.Fatalf("a 10 MB result: error %v, %d bytes, ends %q", res.IsError, len(res.Content), res.Content[max(0, len(res.Content)-60):])
	}
	if !strings.HasPrefix(res.Content, "0123456789") {
		t.Errorf("the result starts %q", res.Content[:20])
	}
}

func TestResultOfManyPartsFitsInAFrame(t *testing.T) {
	p := start(t, mcp.Options{}, testServer("go", "go"))
	res, err := p.servers.Call(context.Background(), "go", "many", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	frame, err := json.Marshal(protocol.ToolCallResult{Text: res.Text, Content: res.Content, StructuredContent: res.Structured})
	if err != nil {
		t.Fatal(err)
	}
	if len(frame) > protocol.MaxMessageBytes/2 || len(res.Text) > mcp.MaxResultBytes || len(res.Content) > 256 || res.Structured != nil {
		t.Errorf("a result of 1,000 parts: %d bytes as a result, text %d bytes, %d parts, structured %d bytes",
			len(frame), len(res.Text), len(res.Content), len(res.Structured))
	}
	if !strings.Contains(res.Text, "left out") {
		t.Errorf("the text does not say it was cut: …%s", res.Text[len(res.Text)-80:])
	}
}

func TestProgressIsToolOutputAndCancellingTheTurnCancelsTheRequest(t *testing.T) {
	p := start(t, mcp.Options{}, testServer("go", "go"))
	slow := p.tool(t, "mcp__go__slow")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var progress []string
	got := make(chan struct{})
	env := &tools.Env{Progress: func(chunk string) {
		mu.Lock()
		defer mu.Unlock()
		progress = append(progress, chunk)
		if len(progress) == 2 {
			close(got)
		}
	}}
	done := make(chan tools.Result)
	go func() { done <- slow.Run(ctx, env, json.RawMessage(`{}`)) }()
	<-got
	cancel()
	res := <-done
	if !res.IsError || !strings.Contains(res.Content, "interrupted") {
		t.Errorf("a cancelled call answered %+v", res)
	}
	mu.Lock()
	first := progress[0]
	mu.Unlock()
	if first != "progress 1: step 1\n" {
		t.Errorf("the first progress is %q", first)
	}
	r := p.resourceOf(t, "go")
	poll.Until(t, "the server to see the call cancelled", func() bool {
		out, _, _ := p.res.Output(r.Ref)
		return strings.Contains(string(out), "slow: cancelled")
	})
	if res := run(p.tool(t, "mcp__go__echo"), `{"text":"after"}`); res.IsError {
		t.Errorf("the server after a cancelled call: %+v", res)
	}
}

func TestChangedToolListIsPickedUp(t *testing.T) {
	p := start(t, mcp.Options{}, testServer("go", "go"))
	if res := run(p.tool(t, "mcp__go__grow"), `{}`); res.IsError {
		t.Fatal(res.Content)
	}
	poll.Until(t, "the tool the server added", func() bool {
		return slices.ContainsFunc(p.servers.Tools(context.Background()), func(tl tools.Tool) bool { return tl.Spec().Name == "mcp__go__extra" })
	})
	if res := run(p.tool(t, "mcp__go__extra"), `{}`); res.Content != "extra" {
		t.Errorf("the added tool answered %+v", res)
	}
}

func TestStoppingAServerResourceEndsItsCalls(t *testing.T) {
	p := start(t, mcp.Options{}, testServer("go", "go"))
	p.servers.Tools(context.Background())
	r := p.resourceOf(t, "go")
	stopped, err := p.res.Stop(r.Ref)
	if err != nil || stopped.State != protocol.ResourceExited || stopped.Status != protocol.ServiceStopped {
		t.Fatalf("stopping %s: %+v, %v", r.Ref, stopped, err)
	}
	if _, err := p.servers.Call(context.Background(), "go", "echo", json.RawMessage(`{"text":"x"}`), nil); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("a call to a stopped server: %v", err)
	}
	if _, err := p.servers.Call(context.Background(), "nope", "echo", nil, nil); err == nil || !strings.Contains(err.Error(), "no such MCP server") {
		t.Errorf("a call to an unknown server: %v", err)
	}
}

func TestServerEnvironmentIsTheGivenOnePlusItsOwn(t *testing.T) {
	s := testServer("go", "go")
	s.Env["SERVER_OWN"] = "mine"
	p := start(t, mcp.Options{Env: []string{"PATH=" + os.Getenv("PATH"), "GIVEN=yes"}}, s)
	res := run(p.tool(t, "mcp__go__env"), `{}`)
	env := strings.Split(res.Content, "\n")
	for _, want := range []string{"GIVEN=yes", "SERVER_OWN=mine"} {
		if !slices.Contains(env, want) {
			t.Errorf("the server's environment lacks %s: %v", want, env)
		}
	}
	if slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "HOME=") }) {
		t.Errorf("the server's environment holds what it was not given: %v", env)
	}
}
