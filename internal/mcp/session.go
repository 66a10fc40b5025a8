package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentd-dev/agentd/internal/atomicfile"
	"github.com/agentd-dev/agentd/protocol"
)

// A session's own servers (protocol.SessionMCPServer: given by an editor
// over ACP, or by agentd mcp add --session) are kept in the home, one file
// per session, beside the provider keys: the home is hidden from the
// session's commands, and the file is 0600 and replaced whole. Their
// values are taken as they are, never expanded: ${VAR} in an editor's
// value is not a way to read the worker's environment.

// SessionDirName is the home's directory of the sessions' own servers.
const SessionDirName = "session-mcp"

// sessionFileVersion is the version of the file's shape.
const sessionFileVersion = 1

// maxSessionFileBytes bounds a session's file: its servers' strings and
// their JSON.
const maxSessionFileBytes = 2 * protocol.MaxSessionMCPBytes

// ErrNotSessionServer is returned by UpdateSession for a removal naming
// no server of the session's own.
var ErrNotSessionServer = errors.New("is none of the session's own MCP servers")

// sessionFile is the file's shape.
type sessionFile struct {
	Version int                         `json:"version"`
	Servers []protocol.SessionMCPServer `json:"servers"`
}

// SessionFile returns the file of session id's own servers.
func SessionFile(home, id string) string {
	return filepath.Join(home, SessionDirName, id+".json")
}

// ReadSession returns session id's own servers, by name; none when it has
// no file.
func ReadSession(home, id string) ([]protocol.SessionMCPServer, error) {
	path := SessionFile(home, id)
	data, err := readBounded(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > maxSessionFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxSessionFileBytes)
	}
	var f sessionFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: not a session's MCP servers: the JSON does not parse", path)
	}
	if f.Version != sessionFileVersion {
		return nil, fmt.Errorf("%s: version %d, want %d", path, f.Version, sessionFileVersion)
	}
	if err := protocol.ValidSessionMCPServers("servers", f.Servers); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f.Servers, nil
}

// SessionChange is what UpdateSession did.
type SessionChange struct {
	// Servers are the session's own servers after the change, by name.
	Servers []protocol.SessionMCPServer
	// Added, Replaced and Removed name the servers the change touched.
	Added, Replaced, Removed []string
}

// Changed reports whether the change touched a server.
func (c SessionChange) Changed() bool {
	return len(c.Added)+len(c.Replaced)+len(c.Removed) > 0
}

// UpdateSession adds (or replaces by name) and removes session id's own
// servers, and writes the file when that changes them. A server given
// again as it is changes nothing. The caller checked add and remove
// (protocol.SessionMCPSetInput.Validate) and serialises the changes of a
// home's sessions.
func UpdateSession(home, id string, add []protocol.SessionMCPServer, remove []string) (SessionChange, error) {
	current, err := ReadSession(home, id)
	if err != nil {
		return SessionChange{}, err
	}
	byName := map[string]protocol.SessionMCPServer{}
	for _, s := range current {
		byName[s.Name] = s
	}
	var c SessionChange
	for i, name := range remove {
		if _, ok := byName[name]; !ok {
			return SessionChange{}, protocol.InvalidField(fmt.Sprintf("input.remove[%d]", i), "%q %v", name, ErrNotSessionServer)
		}
		delete(byName, name)
		c.Removed = append(c.Removed, name)
	}
	for _, s := range add {
		was, ok := byName[s.Name]
		switch {
		case !ok:
			c.Added = append(c.Added, s.Name)
		case !was.Equal(&s):
			c.Replaced = append(c.Replaced, s.Name)
		default:
			continue
		}
		byName[s.Name] = s
	}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		c.Servers = append(c.Servers, byName[name])
	}
	if !c.Changed() {
		return c, nil
	}
	if err := protocol.ValidSessionMCPServers("the session's servers", c.Servers); err != nil {
		return SessionChange{}, protocol.Errorf(protocol.CodeInvalidRequest, "%v", err)
	}
	return c, writeSession(home, id, c.Servers)
}

func writeSession(home, id string, servers []protocol.SessionMCPServer) error {
	path := SessionFile(home, id)
	if len(servers) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := json.Marshal(sessionFile{Version: sessionFileVersion, Servers: servers})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, append(b, '\n'), 0o600)
}

// CopySession gives session to the servers of session from, as a fork
// keeps them.
func CopySession(home, from, to string) error {
	servers, err := ReadSession(home, from)
	if err != nil || len(servers) == 0 {
		return err
	}
	return writeSession(home, to, servers)
}

// RemoveSession forgets session id's own servers, as its removal does.
func RemoveSession(home, id string) error {
	return writeSession(home, id, nil)
}

// sessionServers returns a session's own servers as Load gives them.
func sessionServers(home, id string, servers []protocol.SessionMCPServer) []Server {
	out := make([]Server, 0, len(servers))
	for _, p := range servers {
		s := Server{
			Name: p.Name, Transport: p.Transport, Command: p.Command, Args: slices.Clone(p.Args), URL: p.URL,
			Scope: ScopeSession, Source: SessionFile(home, id), Trusted: true,
		}
		if len(p.Env) > 0 {
			s.Env = map[string]string{}
			for _, kv := range p.Env {
				s.Env[kv.Name] = kv.Value
			}
		}
		if len(p.Headers) > 0 {
			s.Headers = map[string]string{}
			for _, kv := range p.Headers {
				s.Headers[kv.Name] = kv.Value
			}
		}
		out = append(out, s)
	}
	return out
}
