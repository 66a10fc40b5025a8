package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sdkmcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd-dev/agentd/internal/agentdtest/poll"
	"github.com/agentd-dev/agentd/internal/mcp"
	"github.com/agentd-dev/agentd/protocol"
)

func TestASessionsOwnServersAreKeptInA0600FileMergedByNameAndNeverExpanded(t *testing.T) {
	home := t.TempDir()
	t.Setenv("AGENTD_TEST_SECRET_VAR", "from-the-environment")
	if err := os.WriteFile(filepath.Join(home, mcp.UserFileName), []byte(`{"mcpServers":{"shared":{"command":"/bin/user"},"mine":{"command":"/bin/mine"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	a := protocol.SessionMCPServer{Name: "shared", Transport: "stdio", Command: "/bin/editor", Env: []protocol.NameValue{{Name: "TOKEN", Value: "s3cret ${AGENTD_TEST_SECRET_VAR}"}}}
	b := protocol.SessionMCPServer{Name: "web", Transport: "http", URL: "https://example.com/mcp", Headers: []protocol.NameValue{{Name: "Authorization", Value: "Bearer k"}}}
	c, err := mcp.UpdateSession(home, "s1", []protocol.SessionMCPServer{a, b}, nil)
	if err != nil || !slices.Equal(c.Added, []string{"shared", "web"}) || len(c.Replaced)+len(c.Removed) != 0 {
		t.Fatalf("first list: %+v, %v", c, err)
	}
	path := mcp.SessionFile(home, "s1")
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %v", p, fi.Mode(), err, want)
		}
	}
	// The same list again changes nothing; a server changed replaces the
	// one of its name, and the one left out is kept.
	if c, err := mcp.UpdateSession(home, "s1", []protocol.SessionMCPServer{a, b}, nil); err != nil || c.Changed() || len(c.Servers) != 2 {
		t.Fatalf("the same list: %+v, %v", c, err)
	}
	a2 := a
	a2.Args = []string{"--verbose"}
	if c, err := mcp.UpdateSession(home, "s1", []protocol.SessionMCPServer{a2}, nil); err != nil || !slices.Equal(c.Replaced, []string{"shared"}) || len(c.Servers) != 2 {
		t.Fatalf("a changed server: %+v, %v", c, err)
	}
	if _, err := mcp.UpdateSession(home, "s1", nil, []string{"nope"}); err == nil || !strings.Contains(err.Error(), `input.remove[0]`) {
		t.Fatalf("removing a server the session does not have: %v", err)
	}

	conf, err := mcp.LoadSession("s1", t.TempDir(), home, nil)
	if err != nil || len(conf.Problems) != 0 {
		t.Fatalf("load: %v %v", err, conf.Problems)
	}
	byName := map[string]mcp.Server{}
	for _, s := range conf.Servers {
		byName[s.Name] = s
	}
	// The session's own server takes the place of the user's of its name,
	// its values as given.
	if s := byName["shared"]; s.Scope != mcp.ScopeSession || s.Command != "/bin/editor" || s.Env["TOKEN"] != "s3cret ${AGENTD_TEST_SECRET_VAR}" || !s.Trusted {
		t.Errorf("shared: %+v", s)
	}
	if s := byName["mine"]; s.Scope != mcp.ScopeUser {
		t.Errorf("mine: %+v", s)
	}
	if s := byName["web"]; s.Transport != mcp.TransportHTTP || s.Headers["Authorization"] != "Bearer k" {
		t.Errorf("web: %+v", s)
	}
	// What a client sees of them holds no value.
	for _, s := range c.Servers {
		info := s.Info()
		if strings.Contains(strings.Join(slices.Concat(info.Env, info.Headers), " "), "s3cret") || strings.Contains(strings.Join(info.Headers, " "), "Bearer") {
			t.Errorf("info of %s: %+v", s.Name, info)
		}
	}

	if err := mcp.CopySession(home, "s1", "s2"); err != nil {
		t.Fatal(err)
	}
	if got, err := mcp.ReadSession(home, "s2"); err != nil || len(got) != 2 {
		t.Fatalf("a branch's servers: %+v, %v", got, err)
	}
	if c, err := mcp.UpdateSession(home, "s1", nil, []string{"shared", "web"}); err != nil || len(c.Removed) != 2 || len(c.Servers) != 0 {
		t.Fatalf("removing both: %+v, %v", c, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a session without servers of its own keeps its file: %v", err)
	}
	if err := mcp.RemoveSession(home, "s2"); err != nil {
		t.Fatal(err)
	}
	if got, err := mcp.ReadSession(home, "s2"); err != nil || len(got) != 0 {
		t.Fatalf("a removed session's servers: %+v, %v", got, err)
	}
}

func TestADamagedFileOfASessionsOwnServersIsAProblemNotAFailure(t *testing.T) {
	home := t.TempDir()
	path := mcp.SessionFile(home, "s1")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`{"version":1,"servers":[{"name":"x","transport":"stdio","command":"relative","env":[{"name":"K","value":"v"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	conf, err := mcp.LoadSession("s1", t.TempDir(), home, nil)
	if err != nil || len(conf.Problems) != 1 || !strings.Contains(conf.Problems[0].Error(), "servers[0].command") || len(conf.Servers) != 0 {
		t.Fatalf("load: %+v, %v", conf, err)
	}
}

func TestUpdateStartsNewAndChangedServersStopsRemovedOnesAndLeavesTheRest(t *testing.T) {
	p := start(t, mcp.Options{}, testServer("a", "go"))
	p.tool(t, "mcp__a__echo")
	refA := p.resourceOf(t, "a").Ref

	started, stopped := p.servers.Update([]mcp.Server{testServer("a", "go"), testServer("b", "go")})
	if !slices.Equal(started, []string{"b"}) || len(stopped) != 0 {
		t.Fatalf("adding b: started %v, stopped %v", started, stopped)
	}
	if got := run(p.tool(t, "mcp__b__echo"), `{"text":"hi"}`); got.Content != "echo: hi" {
		t.Fatalf("b's echo: %+v", got)
	}
	if ref := p.resourceOf(t, "a").Ref; ref != refA {
		t.Errorf("a was restarted though it did not change: %s, then %s", refA, ref)
	}

	changed := testServer("a", "go")
	changed.Env["AGENTD_TEST_EXTRA"] = "1"
	started, stopped = p.servers.Update([]mcp.Server{changed})
	if !slices.Equal(started, []string{"a"}) || !slices.Equal(stopped, []string{"a", "b"}) {
		t.Fatalf("changing a, dropping b: started %v, stopped %v", started, stopped)
	}
	if got := run(p.tool(t, "mcp__a__echo"), `{"text":"again"}`); got.Content != "echo: again" {
		t.Fatalf("the new a's echo: %+v", got)
	}
	var names []string
	for _, s := range p.servers.List() {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"a"}) {
		t.Errorf("servers after the change: %v", names)
	}
	// The servers stopped end as resources.
	q, err := p.res.Query(protocol.ResourceQueryInput{SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range q.Resources {
		if r.Ref == refA || r.Name == "b" {
			waitExited(t, p, r.Ref)
		}
	}
}

// waitExited waits for a resource to end.
func waitExited(t *testing.T, p *place, ref string) {
	t.Helper()
	poll.Until(t, ref+" to end", func() bool {
		r, err := p.res.Get(ref)
		return err == nil && r.State == protocol.ResourceExited
	})
}

func TestAnSSEServerIsReachedWithItsHeaders(t *testing.T) {
	s := sdkmcp.NewServer(&sdkmcp.Implementation{Name: "sse-test", Version: "1"}, nil)
	type text struct {
		Text string `json:"text"`
	}
	sdkmcp.AddTool(s, &sdkmcp.Tool{Name: "echo"}, func(_ context.Context, _ *sdkmcp.CallToolRequest, in text) (*sdkmcp.CallToolResult, any, error) {
		return &sdkmcp.CallToolResult{Content: []sdkmcp.Content{&sdkmcp.TextContent{Text: "sse echo: " + in.Text}}}, nil, nil
	})
	handler := sdkmcp.NewSSEHandler(func(*http.Request) *sdkmcp.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sse-key" {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	defer srv.Close()
	p := start(t, mcp.Options{}, mcp.Server{Name: "events", Transport: mcp.TransportSSE, URL: srv.URL + "/?key=in-the-query", Headers: map[string]string{"Authorization": "Bearer sse-key"}, Scope: mcp.ScopeSession, Trusted: true})
	if got := run(p.tool(t, "mcp__events__echo"), `{"text":"hi"}`); got.Content != "sse echo: hi" || got.IsError {
		t.Fatalf("echo over SSE: %+v", got)
	}
	// What listings show of it holds no key.
	if r := p.resourceOf(t, "events"); strings.Contains(r.Command, "in-the-query") || r.Command != srv.URL+"/" {
		t.Errorf("the resource shows %q", r.Command)
	}
	p.servers.Close()
}

func FuzzReadSession(f *testing.F) {
	f.Add([]byte(`{"version":1,"servers":[{"name":"a","transport":"stdio","command":"/bin/a","env":[{"name":"K","value":"v"}]}]}`))
	f.Add([]byte(`{"version":1,"servers":[{"name":"w","transport":"sse","url":"https://x/sse","headers":[{"name":"A","value":"b"}]}]}`))
	f.Add([]byte(`{"version":2}`))
	home := f.TempDir()
	path := mcp.SessionFile(home, "s1")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		servers, err := mcp.ReadSession(home, "s1")
		if err != nil {
			return
		}
		// What reads is what a session may hold.
		if err := protocol.ValidSessionMCPServers("servers", servers); err != nil {
			t.Fatalf("read servers that do not check: %v", err)
		}
	})
}
