package protocol

import (
	"errors"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
)

// A session's own MCP servers: given by a client for that session (an
// editor's ACP mcpServers, or agentd mcp add --session), recorded with it,
// and run by each of its workers beside the servers of the user's list,
// the project's .mcp.json and its plugin packages.

// Transports of an MCP server.
const (
	MCPTransportStdio = "stdio"
	MCPTransportHTTP  = "http"
	MCPTransportSSE   = "sse"
)

// MCPScopeSession is the scope of a server a client gave the session.
const MCPScopeSession = "session"

// Bounds of a session's own MCP servers.
const (
	// MaxSessionMCPServers bounds how many servers a session has of its
	// own.
	MaxSessionMCPServers = 32
	// MaxMCPServerBytes bounds one server's strings, summed: command,
	// arguments, environment, URL and headers.
	MaxMCPServerBytes = 64 << 10
	// MaxSessionMCPBytes bounds the strings of all a session's own servers.
	MaxSessionMCPBytes = 256 << 10
	// MaxMCPServerArgs bounds a stdio server's arguments.
	MaxMCPServerArgs = 256
	// MaxMCPServerPairs bounds a server's environment variables, and its
	// headers.
	MaxMCPServerPairs = 128
)

// validMCPServerName reports whether name can name a server: it becomes
// part of its tools' names, which models take as [A-Za-z0-9_-]{1,64},
// with __ the separator. So: 1 to 40 letters, digits, -
// and _, the first a letter or digit. (Checked by hand: the regular
// expression it replaces, its {0,39} expanded, was compiled in every
// agentd process's start.)
func validMCPServerName(name string) bool {
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

// CheckMCPServerName reports why name cannot name an MCP server.
func CheckMCPServerName(name string) error {
	if !validMCPServerName(name) || strings.Contains(name, "__") {
		return errors.New(quote(name) + " is not a server's name: up to 40 letters, digits, - and _ (no __), starting with a letter or digit")
	}
	return nil
}

// SessionMCPServer is an MCP server a client gives a session. Env and
// Headers are often keys: agentd keeps them where the session's commands
// cannot read them and never shows their values to a client.
type SessionMCPServer struct {
	// Name names the server; its tools reach the agent as
	// mcp__<name>__<tool>.
	Name string `json:"name"`
	// Transport is stdio, http (streamable HTTP) or sse.
	Transport string `json:"transport"`
	// Command (an absolute path), Args and Env start a stdio server, in
	// the session's sandbox.
	Command string      `json:"command,omitempty"`
	Args    []string    `json:"args,omitempty"`
	Env     []NameValue `json:"env,omitempty"`
	// URL and Headers reach an http or sse server.
	URL     string      `json:"url,omitempty"`
	Headers []NameValue `json:"headers,omitempty"`
}

// NameValue is an environment variable or an HTTP header.
type NameValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// size is the bytes of s's strings.
func (s *SessionMCPServer) size() int {
	n := len(s.Name) + len(s.Transport) + len(s.Command) + len(s.URL)
	for _, a := range s.Args {
		n += len(a)
	}
	for _, p := range slices.Concat(s.Env, s.Headers) {
		n += len(p.Name) + len(p.Value)
	}
	return n
}

// Equal reports whether s and o configure the same server.
func (s *SessionMCPServer) Equal(o *SessionMCPServer) bool {
	return s.Name == o.Name && s.Transport == o.Transport && s.Command == o.Command && s.URL == o.URL &&
		slices.Equal(s.Args, o.Args) && slices.Equal(s.Env, o.Env) && slices.Equal(s.Headers, o.Headers)
}

// ValidSessionMCPServers checks a session's own MCP servers, naming the
// one at fault as field[i] and its field: at most MaxSessionMCPServers,
// names unique, each valid for its transport. No message quotes an
// environment variable's or a header's value, or a URL.
func ValidSessionMCPServers(field string, servers []SessionMCPServer) error {
	if len(servers) > MaxSessionMCPServers {
		return FieldError(field, "at most %d servers, not %d", MaxSessionMCPServers, len(servers))
	}
	total := 0
	for i := range servers {
		at := field + "[" + itoa(i) + "]"
		if err := servers[i].validate(at); err != nil {
			return err
		}
		if j := slices.IndexFunc(servers, func(o SessionMCPServer) bool { return o.Name == servers[i].Name }); j < i {
			return FieldError(at+".name", "%s is given twice (also %s[%s])", quote(servers[i].Name), field, itoa(j))
		}
		total += servers[i].size()
	}
	if total > MaxSessionMCPBytes {
		return FieldError(field, "the servers hold %d bytes, more than %d", total, MaxSessionMCPBytes)
	}
	return nil
}

// validate checks one server, at names it.
func (s *SessionMCPServer) validate(at string) error {
	if s.Name == "" {
		return FieldError(at+".name", "is required")
	}
	if err := CheckMCPServerName(s.Name); err != nil {
		return FieldError(at+".name", "%s", err.Error())
	}
	if strings.HasPrefix(s.Name, "plugin_") {
		return FieldError(at+".name", "%s: names starting plugin_ are those of plugin packages' servers", quote(s.Name))
	}
	if n := s.size(); n > MaxMCPServerBytes {
		return FieldError(at, "holds %d bytes, more than %d", n, MaxMCPServerBytes)
	}
	switch s.Transport {
	case MCPTransportStdio:
		switch {
		case s.Command == "":
			return FieldError(at+".command", "is required for a stdio server")
		case strings.ContainsRune(s.Command, 0):
			return FieldError(at+".command", "holds a NUL byte")
		case !filepath.IsAbs(s.Command):
			return FieldError(at+".command", "%s is not an absolute path: give the executable's path", quote(s.Command))
		case s.URL != "":
			return FieldError(at+".url", "belongs to an http or sse server, and this one runs a command")
		case len(s.Headers) > 0:
			return FieldError(at+".headers", "belong to an http or sse server, and this one runs a command")
		case len(s.Args) > MaxMCPServerArgs:
			return FieldError(at+".args", "at most %d arguments, not %d", MaxMCPServerArgs, len(s.Args))
		}
		for j, a := range s.Args {
			if strings.ContainsRune(a, 0) {
				return FieldError(at+".args["+itoa(j)+"]", "holds a NUL byte")
			}
		}
		return validPairs(at+".env", s.Env, validEnvName, false)
	case MCPTransportHTTP, MCPTransportSSE:
		switch {
		case s.URL == "":
			return FieldError(at+".url", "is required for an %s server", s.Transport)
		case s.Command != "":
			return FieldError(at+".command", "belongs to a stdio server, and this one is reached at a URL")
		case len(s.Args) > 0:
			return FieldError(at+".args", "belong to a stdio server, and this one is reached at a URL")
		case len(s.Env) > 0:
			return FieldError(at+".env", "belongs to a stdio server, and this one is reached at a URL")
		}
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return FieldError(at+".url", "is not an http(s) URL with a host")
		}
		return validPairs(at+".headers", s.Headers, validHeaderName, true)
	case "":
		return FieldError(at+".transport", "is required: stdio, http or sse")
	default:
		return FieldError(at+".transport", "%s is not a transport: stdio, http or sse", quote(s.Transport))
	}
}

// validPairs checks environment variables or headers: names valid and
// unique, values without NUL (nor, for a header, a line break).
func validPairs(at string, pairs []NameValue, validName func(string) bool, header bool) error {
	if len(pairs) > MaxMCPServerPairs {
		return FieldError(at, "at most %d, not %d", MaxMCPServerPairs, len(pairs))
	}
	for i, p := range pairs {
		here := at + "[" + itoa(i) + "]"
		switch {
		case p.Name == "":
			return FieldError(here+".name", "is required")
		case !validName(p.Name):
			what := "an environment variable's name: no = and no NUL"
			if header {
				what = "a header's name: letters, digits and !#$%&'*+-.^_`|~"
			}
			return FieldError(here+".name", "%s is not %s", quote(p.Name), what)
		case strings.ContainsRune(p.Value, 0):
			return FieldError(here+".value", "holds a NUL byte")
		case header && strings.ContainsAny(p.Value, "\r\n"):
			return FieldError(here+".value", "holds a line break")
		}
		if j := slices.IndexFunc(pairs, func(o NameValue) bool { return sameName(o.Name, p.Name, header) }); j < i {
			return FieldError(here+".name", "%s is given twice (also %s[%s])", quote(p.Name), at, itoa(j))
		}
	}
	return nil
}

func sameName(a, b string, header bool) bool {
	if header {
		return strings.EqualFold(a, b)
	}
	return a == b
}

func validEnvName(s string) bool { return !strings.ContainsAny(s, "=\x00") && len(s) <= 1024 }

func validHeaderName(s string) bool {
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return len(s) <= 1024
}

// quote quotes s for a message, cut to 80 bytes.
func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return "\"" + strings.ReplaceAll(s, "\"", "\\\"") + "\""
}

// SessionMCPSetInput is the input of session.mcp.set: it adds or
// replaces the session's own servers by name, and removes some. With
// neither it changes nothing and answers the list.
type SessionMCPSetInput struct {
	SessionID string `json:"sessionId"`
	// Servers are added, each replacing the session's server of its name;
	// the session's other servers are kept.
	Servers []SessionMCPServer `json:"servers,omitempty"`
	// Remove names servers of the session's own to remove.
	Remove []string `json:"remove,omitempty"`
}

// Validate checks the input.
func (in *SessionMCPSetInput) Validate() error {
	if err := requireString("input.sessionId", in.SessionID); err != nil {
		return err
	}
	if err := ValidSessionMCPServers("input.servers", in.Servers); err != nil {
		return err
	}
	if len(in.Remove) > MaxSessionMCPServers {
		return FieldError("input.remove", "at most %d names, not %d", MaxSessionMCPServers, len(in.Remove))
	}
	for i, name := range in.Remove {
		at := "input.remove[" + itoa(i) + "]"
		if err := CheckMCPServerName(name); err != nil {
			return FieldError(at, "%s", err.Error())
		}
		if slices.Index(in.Remove, name) < i {
			return FieldError(at, "%s is given twice", quote(name))
		}
		if slices.ContainsFunc(in.Servers, func(s SessionMCPServer) bool { return s.Name == name }) {
			return FieldError(at, "%s is also in input.servers: a server is added or removed, not both", quote(name))
		}
	}
	return nil
}

// SessionRef implements SessionScoped.
func (in *SessionMCPSetInput) SessionRef() *string { return &in.SessionID }

// SessionMCPSetResult is the result of session.mcp.set: the session's own
// servers after the change, without their secrets, and what changed.
type SessionMCPSetResult struct {
	Servers []SessionMCPServerInfo `json:"servers"`
	// Added, Replaced and Removed name the servers the change touched; a
	// server given again as it was is in none.
	Added    []string `json:"added"`
	Replaced []string `json:"replaced"`
	Removed  []string `json:"removed"`
}

// SessionMCPServerInfo is a session's own server as clients see it: the
// names of its environment variables and headers, never their values,
// and its URL without credentials or query.
type SessionMCPServerInfo struct {
	Name      string   `json:"name"`
	Transport string   `json:"transport"`
	Command   string   `json:"command,omitempty"`
	Args      []string `json:"args,omitempty"`
	Env       []string `json:"env,omitempty"`
	URL       string   `json:"url,omitempty"`
	Headers   []string `json:"headers,omitempty"`
}

// Info returns s as clients see it.
func (s *SessionMCPServer) Info() SessionMCPServerInfo {
	info := SessionMCPServerInfo{Name: s.Name, Transport: s.Transport, Command: s.Command, Args: slices.Clone(s.Args), URL: DisplayURL(s.URL)}
	for _, p := range s.Env {
		info.Env = append(info.Env, p.Name)
	}
	for _, p := range s.Headers {
		info.Headers = append(info.Headers, p.Name)
	}
	return info
}

// DisplayURL returns u without its user information, query and fragment,
// which may hold keys.
func DisplayURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(a URL that does not parse)"
	}
	p.User, p.RawQuery, p.ForceQuery, p.Fragment, p.RawFragment = nil, "", false, "", ""
	return p.String()
}
