package mcp_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/internal/mcp"
)

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestParseNamesTheWrongField(t *testing.T) {
	lookup := func(name string) (string, bool) {
		if name == "SET" {
			return "value", true
		}
		return "", false
	}
	for _, c := range []struct{ name, file, want string }{
		{"not an object", `[]`, "not a JSON object"},
		{"no mcpServers", `{"servers": {}}`, "mcpServers: missing"},
		{"mcpServers not an object", `{"mcpServers": []}`, "mcpServers: must be an object"},
		{"bad name", `{"mcpServers": {"a b": {"command": "x"}}}`, `mcpServers.a b: "a b" is not a server's name`},
		{"double underscore", `{"mcpServers": {"a__b": {"command": "x"}}}`, "no __"},
		{"server not an object", `{"mcpServers": {"s": "x"}}`, "mcpServers.s: must be an object"},
		{"command not a string", `{"mcpServers": {"s": {"command": 3}}}`, "mcpServers.s.command: must be a string"},
		{"arg not a string", `{"mcpServers": {"s": {"command": "x", "args": ["a", 2]}}}`, "mcpServers.s.args[1]: must be a string"},
		{"env value not a string", `{"mcpServers": {"s": {"command": "x", "env": {"K": true}}}}`, "mcpServers.s.env.K: must be a string"},
		{"unset variable", `{"mcpServers": {"s": {"command": "x", "env": {"K": "${UNSET}"}}}}`, "mcpServers.s.env.K: ${UNSET} is not set"},
		{"no command", `{"mcpServers": {"s": {"args": ["a"]}}}`, "mcpServers.s.command: is required"},
		{"http without url", `{"mcpServers": {"s": {"type": "http"}}}`, "mcpServers.s.url: is required"},
		{"bad url", `{"mcpServers": {"s": {"type": "http", "url": "ftp://x"}}}`, `mcpServers.s.url: "ftp://x" is not an http(s) URL`},
		{"sse without a url", `{"mcpServers": {"s": {"type": "sse"}}}`, `mcpServers.s.url: is required`},
		{"unknown type", `{"mcpServers": {"s": {"type": "ws", "url": "http://x"}}}`, `mcpServers.s.type: "ws" is not a transport`},
		{"network not a boolean", `{"mcpServers": {"s": {"command": "x", "network": "yes"}}}`, "mcpServers.s.network: must be true or false"},
		{"both", `{"mcpServers": {"s": {"type": "http", "url": "http://x", "command": "y"}}}`, "mcpServers.s.command: belongs to a stdio server"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, problems := mcp.Parse([]byte(c.file), lookup)
			if len(problems) != 1 || !strings.Contains(problems[0].Error(), c.want) {
				t.Errorf("problems %v, want one with %q", problems, c.want)
			}
		})
	}
}

func TestParseReadsTheEcosystemShapeAndExpandsVariables(t *testing.T) {
	lookup := func(name string) (string, bool) {
		v, ok := map[string]string{"TOKEN": "t0k", "DIR": "/d"}[name]
		return v, ok
	}
	servers, problems := mcp.Parse([]byte(`{"mcpServers": {
		"fs": {"command": "npx", "args": ["-y", "server-fs", "${DIR}/x"], "env": {"K": "${MISSING:-fallback}"}, "network": true},
		"web": {"type": "http", "url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
		"bare": {"url": "http://localhost:1/mcp"},
		"broken": {"command": 1}
	}}`), lookup)
	if len(problems) != 1 {
		t.Errorf("problems: %v", problems)
	}
	if len(servers) != 3 {
		t.Fatalf("servers: %+v", servers)
	}
	bare, fs, web := servers[0], servers[1], servers[2]
	if fs.Transport != mcp.TransportStdio || !slices.Equal(fs.Args, []string{"-y", "server-fs", "/d/x"}) || fs.Env["K"] != "fallback" || !fs.Network {
		t.Errorf("fs: %+v", fs)
	}
	if web.Transport != mcp.TransportHTTP || web.Headers["Authorization"] != "Bearer t0k" {
		t.Errorf("web: %+v", web)
	}
	if bare.Transport != mcp.TransportHTTP {
		t.Errorf("a server of a url alone is an HTTP one: %+v", bare)
	}
}

func TestLoadRunsProjectServersOnceTrustedAndNamesPluginServersApart(t *testing.T) {
	home, repo := t.TempDir(), t.TempDir()
	sub := filepath.Join(repo, "a", "b")
	write(t, filepath.Join(repo, ".git", "HEAD"), "ref: refs/heads/main\n")
	write(t, filepath.Join(repo, ".mcp.json"), `{"mcpServers": {"root": {"command": "r"}, "shared": {"command": "from-root"}}}`)
	write(t, filepath.Join(sub, ".mcp.json"), `{"mcpServers": {"shared": {"command": "from-sub"}}}`)
	write(t, filepath.Join(filepath.Dir(repo), ".mcp.json.unused"), `{}`)
	if err := mcp.AddUser(home, mcp.Server{Name: "mine", Command: "m", Env: map[string]string{"K": "${HOME}"}}); err != nil {
		t.Fatal(err)
	}
	if err := mcp.AddUser(home, mcp.Server{Name: "shared", Command: "from-user"}); err != nil {
		t.Fatal(err)
	}
	plugin := func(name string) string {
		dir := filepath.Join(t.TempDir(), name)
		write(t, filepath.Join(dir, ".claude-plugin", "plugin.json"), `{"name": "`+name+`", "version": "1.0.0"}`)
		write(t, filepath.Join(dir, ".mcp.json"), `{"mcpServers": {"tools": {"command": "${CLAUDE_PLUGIN_ROOT}/bin/server", "args": ["${CLAUDE_PLUGIN_ROOT}"]}}}`)
		return dir
	}
	p1, p2 := plugin("alpha"), plugin("beta")

	conf, err := mcp.Load(sub, home, []string{p1, p2})
	if err != nil || len(conf.Problems) > 0 {
		t.Fatal(err, conf.Problems)
	}
	byName := map[string]mcp.Server{}
	for _, s := range conf.Servers {
		byName[s.Name] = s
	}
	if s := byName["shared"]; s.Command != "from-sub" || s.Scope != mcp.ScopeProject || s.Trusted || s.Project != repo {
		t.Errorf("the nearest project file wins, and waits for trust: %+v", s)
	}
	if s := byName["mine"]; !s.Trusted || s.Scope != mcp.ScopeUser || s.Env["K"] != os.Getenv("HOME") {
		t.Errorf("the user's server: %+v", s)
	}
	for _, p := range []struct{ name, dir string }{{"plugin_alpha_tools", p1}, {"plugin_beta_tools", p2}} {
		s := byName[p.name]
		if s.Command != p.dir+"/bin/server" || !slices.Equal(s.Args, []string{p.dir}) || !s.Trusted || s.Scope != mcp.ScopePlugin || s.Source != p.dir {
			t.Errorf("%s: %+v", p.name, s)
		}
	}
	if got := len(conf.Runnable()); got != 3 {
		t.Errorf("untrusted, %d servers run: %+v", got, conf.Runnable())
	}

	root, err := mcp.Trust(home, sub)
	if err != nil || root != repo {
		t.Fatalf("trust %s: %s, %v", sub, root, err)
	}
	conf, err = mcp.Load(sub, home, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, s := range conf.Runnable() {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"mine", "root", "shared"}) {
		t.Errorf("trusted, the servers that run: %v", names)
	}

	if err := mcp.RemoveUser(home, "mine"); err != nil {
		t.Fatal(err)
	}
	if err := mcp.RemoveUser(home, "mine"); err == nil {
		t.Error("removing a server twice succeeded")
	}
	if err := mcp.AddUser(home, mcp.Server{Name: "x__y", Command: "c"}); err == nil {
		t.Error("a name with __ was added")
	}
}

func TestAProblemLeavesTheOtherFilesServersRunning(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	write(t, filepath.Join(home, mcp.UserFileName), `{"mcpServers": {"ok": {"command": "c"}, "bad": {"command": ["c"]}}}`)
	write(t, filepath.Join(dir, mcp.FileName), `{not json`)
	conf, err := mcp.Load(dir, home, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(conf.Servers) != 1 || conf.Servers[0].Name != "ok" || len(conf.Problems) != 2 {
		t.Errorf("servers %+v, problems %v", conf.Servers, conf.Problems)
	}
	for _, p := range conf.Problems {
		if !strings.Contains(p.Error(), home) && !strings.Contains(p.Error(), dir) {
			t.Errorf("a problem does not name its file: %v", p)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"mcpServers": {"s": {"command": "x", "args": ["${A:-b}"], "env": {"K": "v"}}}}`))
	f.Add([]byte(`{"mcpServers": {"w": {"type": "http", "url": "http://h/${X}", "headers": {"A": "b"}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		servers, _ := mcp.Parse(data, func(string) (string, bool) { return "v", true })
		for _, s := range servers {
			if mcp.CheckName(s.Name) != nil || (s.Transport == mcp.TransportStdio) == (s.Command == "") {
				t.Fatalf("a server Parse let through: %+v", s)
			}
		}
	})
}

// serverName is the rule CheckName states: up to 40 letters, digits, -
// and _, starting with a letter or digit, without __.
var serverName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$`)

func TestCheckNameTakesExactlyTheNamesItsMessageStates(t *testing.T) {
	for _, name := range []string{
		"", "a", "A9", "9", "-a", "_a", "a-b_c", "a__b", "a_", "a-", "é", "a b", "a.b", "a/b",
		strings.Repeat("x", 40), strings.Repeat("x", 41), "x" + strings.Repeat("-", 39), "a\n",
	} {
		want := serverName.MatchString(name) && !strings.Contains(name, "__")
		if got := mcp.CheckName(name) == nil; got != want {
			t.Errorf("CheckName(%q) accepts: %v, want %v", name, got, want)
		}
	}
}

func FuzzCheckName(f *testing.F) {
	f.Add("server-1")
	f.Add("a__b")
	f.Add(strings.Repeat("x", 41))
	f.Fuzz(func(t *testing.T, name string) {
		want := serverName.MatchString(name) && !strings.Contains(name, "__")
		if got := mcp.CheckName(name) == nil; got != want {
			t.Fatalf("CheckName(%q) accepts: %v, want %v", name, got, want)
		}
	})
}
