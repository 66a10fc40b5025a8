package mcp

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Transports of a server.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

// Scopes: where a server's configuration came from.
const (
	// ScopeUser is agentd's own list in the home (agentd mcp add).
	ScopeUser = "user"
	// ScopeProject is a .mcp.json of the session's directory or a parent
	// up to the repository's root; it runs once the project is trusted.
	ScopeProject = "project"
	// ScopePlugin is the .mcp.json of a plugin package of the session.
	ScopePlugin = "plugin"
)

// FileName is the ecosystem's name of a project's MCP configuration,
// and of a plugin package's.
const FileName = ".mcp.json"

// UserFileName is agentd's own list of servers, in the home, in the same
// shape.
const UserFileName = "mcp.json"

// pluginRootVar is expanded to a plugin package's directory in its
// .mcp.json, as Claude Code does.
const pluginRootVar = "CLAUDE_PLUGIN_ROOT"

// maxFileBytes bounds a configuration file read.
const maxFileBytes = 1 << 20

// Server is one MCP server as configured, its values expanded.
type Server struct {
	// Name names the server in its tools' names: mcp__<Name>__<tool>.
	Name      string `json:"name"`
	Transport string `json:"transport"`
	// Command, Args and Env start a stdio server. Env is added to the
	// environment the session's commands get.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// URL and Headers reach a streamable HTTP server.
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	// Network lets a stdio server use the network when the session's
	// commands may not (agentd's own key; other programs ignore it).
	Network bool `json:"network,omitempty"`
	// Scope and Source say where it was configured: the file, and for a
	// plugin the package's directory.
	Scope  string `json:"scope"`
	Source string `json:"source"`
	// Trusted reports whether it may run: a project's server runs once
	// its project is trusted (agentd mcp trust); the others always.
	Trusted bool `json:"trusted"`
	// Project is the trusted directory a project's server needs.
	Project string `json:"project,omitempty"`
}

// Config is the MCP servers of one session.
type Config struct {
	// Servers are in the order their names sort; a name is unique.
	Servers []Server
	// Problems are the configuration's mistakes, each naming its file and
	// field: the servers they touch are left out, the others run.
	Problems []error
}

// Runnable returns the servers that may run.
func (c *Config) Runnable() []Server {
	return slices.DeleteFunc(slices.Clone(c.Servers), func(s Server) bool { return !s.Trusted })
}

// Load reads the MCP configuration of a session in sessionDir: the user's
// list in home, then each .mcp.json from the repository's root (the
// nearest parent with .git) down to sessionDir, nearer files replacing a
// server of the same name, then the .mcp.json of each plugin package in
// pluginDirs, its servers named plugin_<package>_<server> so that
// packages never collide. ${VAR} and ${VAR:-default} are expanded from
// this process's environment, and in a package's file ${CLAUDE_PLUGIN_ROOT}
// to the package's directory. A mistake in a file is a Problem, not an
// error: Load fails only when the trust list cannot be read.
func Load(sessionDir, home string, pluginDirs []string) (*Config, error) {
	return load(sessionDir, home, pluginDirs, os.LookupEnv)
}

func load(sessionDir, home string, pluginDirs []string, lookup func(string) (string, bool)) (*Config, error) {
	trusted, err := readTrust(home)
	if err != nil {
		return nil, err
	}
	c := &Config{}
	byName := map[string]Server{}
	add := func(servers []Server) {
		for _, s := range servers {
			byName[s.Name] = s
		}
	}
	if home != "" {
		add(c.readFile(filepath.Join(home, UserFileName), ScopeUser, "", lookup))
	}
	if sessionDir != "" {
		root := ProjectRoot(sessionDir)
		ok := slices.Contains(trusted, root)
		for _, dir := range projectDirs(sessionDir, root) {
			servers := c.readFile(filepath.Join(dir, FileName), ScopeProject, "", lookup)
			for i := range servers {
				servers[i].Trusted, servers[i].Project = ok, root
			}
			add(servers)
		}
	}
	for _, dir := range pluginDirs {
		add(c.readPlugin(dir, lookup))
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		c.Servers = append(c.Servers, byName[name])
	}
	return c, nil
}

// ProjectRoot returns the project dir belongs to: the nearest directory
// at or above it holding .git, or dir itself outside a repository.
func ProjectRoot(dir string) string {
	dir = filepath.Clean(dir)
	for d := dir; ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dir
		}
		d = parent
	}
}

// projectDirs returns root, then each directory on the way down to dir.
func projectDirs(dir, root string) []string {
	var dirs []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		dirs = append(dirs, d)
		if d == root || filepath.Dir(d) == d {
			break
		}
	}
	slices.Reverse(dirs)
	return dirs
}

// readPlugin reads a plugin package's .mcp.json.
func (c *Config) readPlugin(dir string, lookup func(string) (string, bool)) []Server {
	dir = filepath.Clean(dir)
	pkg := pluginName(dir)
	withRoot := func(name string) (string, bool) {
		if name == pluginRootVar {
			return dir, true
		}
		return lookup(name)
	}
	servers := c.readFile(filepath.Join(dir, FileName), ScopePlugin, pkg, withRoot)
	for i := range servers {
		servers[i].Source = dir
	}
	return servers
}

// pluginName returns a package's name as its .claude-plugin/plugin.json
// says, else its directory's, made fit for a tool's name.
func pluginName(dir string) string {
	name := filepath.Base(dir)
	if b, err := os.ReadFile(filepath.Join(dir, ".claude-plugin", "plugin.json")); err == nil {
		var m struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(b, &m) == nil && m.Name != "" {
			name = m.Name
		}
	}
	return sanitize(name)
}

// sanitize maps what a tool's name cannot hold to _, and shortens runs
// of _ so that __ stays the separator.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '_'
		}
	}
	out := string(b)
	for strings.Contains(out, "__") {
		out = strings.ReplaceAll(out, "__", "_")
	}
	return strings.Trim(out, "_")
}

// readFile reads one file of the ecosystem's shape; a missing file is no
// problem. prefix, when set, makes each name plugin_<prefix>_<name>.
func (c *Config) readFile(path, scope, prefix string, lookup func(string) (string, bool)) []Server {
	data, err := readBounded(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		c.Problems = append(c.Problems, fmt.Errorf("%s: %w", path, err))
		return nil
	}
	servers, problems := Parse(data, lookup)
	for _, p := range problems {
		c.Problems = append(c.Problems, fmt.Errorf("%s: %w", path, p))
	}
	for i := range servers {
		servers[i].Scope, servers[i].Source, servers[i].Trusted = scope, path, scope != ScopeProject
		if prefix != "" {
			servers[i].Name = "plugin_" + prefix + "_" + servers[i].Name
		}
	}
	return servers
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxFileBytes)
	}
	return data, nil
}

// validName reports whether name can name a server: it becomes part of
// its tools' names, which models take as [A-Za-z0-9_-]{1,64}, with __
// the separator. So: 1 to 40 letters, digits, - and _, the first a letter
// or digit. (Checked by hand: the regular expression it replaces, its
// {0,39} expanded, was compiled in every agentd process's start.)
func validName(name string) bool {
	if len(name) == 0 || len(name) > 40 {
		return false
	}
	for i := range len(name) {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case (c == '-' || c == '_') && i > 0:
		default:
			return false
		}
	}
	return true
}

// CheckName reports why name cannot name a server.
func CheckName(name string) error {
	if !validName(name) || strings.Contains(name, "__") {
		return fmt.Errorf("%q is not a server's name: up to 40 letters, digits, - and _ (no __), starting with a letter or digit", name)
	}
	return nil
}

// Parse reads a file of the ecosystem's shape, {"mcpServers": {NAME:
// {"command", "args", "env"} | {"type": "http", "url", "headers"}}},
// expanding ${VAR} and ${VAR:-default} with lookup. Each problem names
// the field at fault; a server with one is left out.
func Parse(data []byte, lookup func(string) (string, bool)) ([]Server, []error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, []error{fmt.Errorf("not a JSON object: %v", err)}
	}
	raw, ok := top["mcpServers"]
	if !ok {
		return nil, []error{errors.New(`mcpServers: missing: the file is {"mcpServers": {"NAME": {...}}}`)}
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil || entries == nil {
		return nil, []error{errors.New("mcpServers: must be an object of servers by name")}
	}
	var servers []Server
	var problems []error
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		s, err := parseServer(name, entries[name], lookup)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		servers = append(servers, s)
	}
	return servers, problems
}

// fieldError names the field of a server at fault.
func fieldError(name, field, format string, args ...any) error {
	at := "mcpServers." + name
	if field != "" {
		at += "." + field
	}
	return fmt.Errorf("%s: %s", at, fmt.Sprintf(format, args...))
}

func parseServer(name string, raw json.RawMessage, lookup func(string) (string, bool)) (Server, error) {
	if err := CheckName(name); err != nil {
		return Server{}, fieldError(name, "", "%v", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return Server{}, fieldError(name, "", "must be an object")
	}
	s := Server{Name: name}
	str := func(field string, dst *string) error {
		v, ok := fields[field]
		if !ok {
			return nil
		}
		if err := json.Unmarshal(v, dst); err != nil || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return fieldError(name, field, "must be a string")
		}
		x, err := expand(*dst, lookup)
		if err != nil {
			return fieldError(name, field, "%v", err)
		}
		*dst = x
		return nil
	}
	strMap := func(field string, dst *map[string]string) error {
		v, ok := fields[field]
		if !ok {
			return nil
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(v, &m); err != nil || m == nil {
			return fieldError(name, field, "must be an object of strings")
		}
		*dst = map[string]string{}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			var x string
			if err := json.Unmarshal(m[k], &x); err != nil {
				return fieldError(name, field+"."+k, "must be a string")
			}
			x, err := expand(x, lookup)
			if err != nil {
				return fieldError(name, field+"."+k, "%v", err)
			}
			(*dst)[k] = x
		}
		return nil
	}
	var typ string
	if err := cmp.Or(str("type", &typ), str("command", &s.Command), str("url", &s.URL),
		strMap("env", &s.Env), strMap("headers", &s.Headers)); err != nil {
		return Server{}, err
	}
	if v, ok := fields["args"]; ok {
		var args []json.RawMessage
		if err := json.Unmarshal(v, &args); err != nil {
			return Server{}, fieldError(name, "args", "must be an array of strings")
		}
		for i, a := range args {
			var x string
			if err := json.Unmarshal(a, &x); err != nil {
				return Server{}, fieldError(name, fmt.Sprintf("args[%d]", i), "must be a string")
			}
			x, err := expand(x, lookup)
			if err != nil {
				return Server{}, fieldError(name, fmt.Sprintf("args[%d]", i), "%v", err)
			}
			s.Args = append(s.Args, x)
		}
	}
	if v, ok := fields["network"]; ok {
		if err := json.Unmarshal(v, &s.Network); err != nil {
			return Server{}, fieldError(name, "network", "must be true or false")
		}
	}
	switch typ {
	case "", TransportStdio:
		if s.URL != "" && s.Command == "" && typ == "" {
			s.Transport = TransportHTTP // {"url": …} alone is an HTTP server
			break
		}
		s.Transport = TransportStdio
	case TransportHTTP, "streamable-http", "streamableHttp":
		s.Transport = TransportHTTP
	case "sse":
		return Server{}, fieldError(name, "type", `"sse" (the 2024 transport) is not supported: use the server's streamable HTTP endpoint with "type": "http"`)
	default:
		return Server{}, fieldError(name, "type", `%q is not a transport: "stdio" or "http"`, typ)
	}
	switch s.Transport {
	case TransportStdio:
		if s.Command == "" {
			return Server{}, fieldError(name, "command", "is required for a stdio server (or give url for an HTTP one)")
		}
		if s.URL != "" || len(s.Headers) > 0 {
			return Server{}, fieldError(name, "url", "belongs to an HTTP server, and this one runs a command")
		}
	case TransportHTTP:
		if s.URL == "" {
			return Server{}, fieldError(name, "url", "is required for an HTTP server")
		}
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Server{}, fieldError(name, "url", "%q is not an http(s) URL", s.URL)
		}
		if s.Command != "" || len(s.Args) > 0 || len(s.Env) > 0 {
			return Server{}, fieldError(name, "command", "belongs to a stdio server, and this one is reached at a URL")
		}
	}
	return s, nil
}

// expand replaces ${VAR} and ${VAR:-default} in s; a variable that is not
// set and has no default is an error.
func expand(s string, lookup func(string) (string, bool)) (string, error) {
	var out strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			out.WriteString(s)
			return out.String(), nil
		}
		out.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("%q: ${ without its }", s)
		}
		ref := s[i+2 : i+end]
		name, def, hasDef := strings.Cut(ref, ":-")
		if name == "" {
			return "", fmt.Errorf("%q: ${} names no variable", s)
		}
		v, ok := lookup(name)
		switch {
		case ok:
			out.WriteString(v)
		case hasDef:
			out.WriteString(def)
		default:
			return "", fmt.Errorf("${%s} is not set (write ${%s:-default} for a default)", name, name)
		}
		s = s[i+end+1:]
	}
}
