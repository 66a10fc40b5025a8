package mcp_test

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/internal/mcp"
	"github.com/agentd-dev/agentd/internal/sandbox"
	"github.com/agentd-dev/agentd/protocol"
)

// A stdio server runs in the session's sandbox: it never reads what is
// hidden (agentd's home), and it opens no TCP connection when the
// session's network is off, unless its configuration allows it the
// network.
func TestStdioServersRunInTheSessionsSandboxWithNetworkPerServer(t *testing.T) {
	if err := sandbox.Check(); err != nil {
		t.Skipf("no sandbox on this kernel: %v", err)
	}
	work, home := t.TempDir(), t.TempDir()
	secret := filepath.Join(home, "credentials.json")
	if err := os.WriteFile(secret, []byte("sk-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	policy := func(networkOff bool) *sandbox.Policy {
		p := &sandbox.Policy{Mode: protocol.SandboxWorkspace, NetworkOff: networkOff, Workspace: []string{work}, Tmp: t.TempDir(), Hidden: []string{home}}
		t.Cleanup(p.Close)
		return p
	}
	off, on := policy(true), policy(false)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	walled, open := testServer("walled", "go"), testServer("open", "go")
	open.Network = true
	p := start(t, mcp.Options{Sandbox: func(network bool) (*sandbox.Policy, error) {
		if network {
			return on, nil
		}
		return off, nil
	}}, walled, open)

	if res := run(p.tool(t, "mcp__walled__read"), `{"path": "`+secret+`"}`); !res.IsError || strings.Contains(res.Content, "sk-secret") {
		t.Errorf("a sandboxed server read the home: %+v", res)
	}
	dial := `{"addr": "` + ln.Addr().String() + `"}`
	if res := run(p.tool(t, "mcp__walled__dial"), dial); !res.IsError {
		t.Errorf("a server of a session without network connected: %+v", res)
	}
	if res := run(p.tool(t, "mcp__open__dial"), dial); res.IsError {
		t.Errorf("a server allowed the network did not connect: %+v", res)
	}
	if res := run(p.tool(t, "mcp__open__read"), `{"path": "`+secret+`"}`); !res.IsError {
		t.Errorf("a server allowed the network read the home: %+v", res)
	}
}

// Stdio servers start together, from one launcher per sandbox: each is
// walled in (the home unreadable) and runs with the environment it is
// given and its own entries, never the worker's (a key the worker holds
// in its environment stays out), nor another server's.
func TestStdioServersStartedTogetherAreEachWalledWithTheirOwnEnvironment(t *testing.T) {
	if err := sandbox.Check(); err != nil {
		t.Skipf("no sandbox on this kernel: %v", err)
	}
	t.Setenv("OPENAI_API_KEY", "sk-in-the-workers-own-environment")
	work, home, tmp := t.TempDir(), t.TempDir(), t.TempDir()
	secret := filepath.Join(home, "credentials.json")
	if err := os.WriteFile(secret, []byte("sk-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	pol := &sandbox.Policy{Mode: protocol.SandboxWorkspace, Workspace: []string{work}, Tmp: tmp, Hidden: []string{home}}
	t.Cleanup(pol.Close)
	names := []string{"a", "b", "c"}
	var servers []mcp.Server
	for _, name := range names {
		sv := testServer(name, "go")
		sv.Env["OWN"] = name
		servers = append(servers, sv)
	}
	p := start(t, mcp.Options{
		Env:     []string{"PATH=" + os.Getenv("PATH"), "SESSION=given"},
		Sandbox: func(bool) (*sandbox.Policy, error) { return pol, nil },
	}, servers...)
	for _, name := range names {
		if res := run(p.tool(t, "mcp__"+name+"__read"), `{"path": "`+secret+`"}`); !res.IsError || strings.Contains(res.Content, "sk-secret") {
			t.Errorf("server %s read the home: %+v", name, res)
		}
		res := run(p.tool(t, "mcp__"+name+"__env"), `{}`)
		env := strings.Split(res.Content, "\n")
		for _, want := range []string{"SESSION=given", "OWN=" + name, "TMPDIR=" + tmp} {
			if !slices.Contains(env, want) {
				t.Errorf("server %s's environment lacks %s: %q", name, want, env)
			}
		}
		if strings.Contains(res.Content, "sk-in-the-workers") || len(env) != 5 { // PATH, SESSION, its kind, OWN, TMPDIR
			t.Errorf("server %s's environment holds more than it was given: %q", name, env)
		}
	}
}
