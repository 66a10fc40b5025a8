package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentd-dev/agentd/internal/atomicfile"
)

// The user's own servers (home/mcp.json, in the ecosystem's shape) and the
// projects whose servers may run (home/mcp-trust.json) are files of the
// home, replaced whole.

// TrustFileName lists the trusted projects in the home.
const TrustFileName = "mcp-trust.json"

// ErrNotListed is returned by RemoveUser when the user's list has no
// server of that name.
var ErrNotListed = errors.New("no such server in the user's list")

// trustFile is the trust list's shape.
type trustFile struct {
	// Projects are the trusted projects' roots, absolute.
	Projects []string `json:"projects"`
}

// readTrust returns the trusted projects' roots.
func readTrust(home string) ([]string, error) {
	if home == "" {
		return nil, nil
	}
	path := filepath.Join(home, TrustFileName)
	data, err := readBounded(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the trusted projects: %w", err)
	}
	var f trustFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: not a list of trusted projects: %v", path, err)
	}
	return f.Projects, nil
}

// Trust records dir's project (ProjectRoot) as trusted, so that its
// .mcp.json servers run from the next worker start, and returns it.
func Trust(home, dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", abs)
	}
	root := ProjectRoot(abs)
	projects, err := readTrust(home)
	if err != nil {
		return "", err
	}
	if slices.Contains(projects, root) {
		return root, nil
	}
	b, err := json.MarshalIndent(trustFile{Projects: append(projects, root)}, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", err
	}
	return root, atomicfile.Write(filepath.Join(home, TrustFileName), append(b, '\n'), 0o600)
}

// userFile is the user's list as it is written: the ecosystem's shape.
type userFile struct {
	MCPServers map[string]userServer `json:"mcpServers"`
}

type userServer struct {
	Type    string            `json:"type,omitempty"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Network bool              `json:"network,omitempty"`
}

// readUser reads the user's list as written (not expanded).
func readUser(home string) (map[string]json.RawMessage, error) {
	path := filepath.Join(home, UserFileName)
	data, err := readBounded(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]json.RawMessage{}, nil
	}
	if err != nil {
		return nil, err
	}
	var f struct {
		MCPServers map[string]json.RawMessage `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: not a JSON object: %v", path, err)
	}
	if f.MCPServers == nil {
		f.MCPServers = map[string]json.RawMessage{}
	}
	return f.MCPServers, nil
}

func writeUser(home string, servers map[string]json.RawMessage) error {
	b, err := json.MarshalIndent(map[string]any{"mcpServers": servers}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(home, UserFileName), append(b, '\n'), 0o600)
}

// AddUser adds s (Name, and Command with Args and Env, or URL with
// Headers) to the user's list, replacing a server of the same name. It is
// checked as Load would read it, ${VAR} left for each worker start.
func AddUser(home string, s Server) error {
	entry := userServer{Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers, Network: s.Network}
	if s.URL != "" {
		entry.Type = TransportHTTP
	}
	raw, err := json.Marshal(entry)
	if err != nil {
		return err
	}
	keep := func(name string) (string, bool) { return "${" + name + "}", true }
	if _, problems := Parse(fmt.Appendf(nil, `{"mcpServers":{%q:%s}}`, s.Name, raw), keep); len(problems) > 0 {
		return problems[0]
	}
	servers, err := readUser(home)
	if err != nil {
		return err
	}
	servers[s.Name] = raw
	return writeUser(home, servers)
}

// RemoveUser removes a server from the user's list.
func RemoveUser(home, name string) error {
	servers, err := readUser(home)
	if err != nil {
		return err
	}
	if _, ok := servers[name]; !ok {
		return fmt.Errorf("%q: %w", name, ErrNotListed)
	}
	delete(servers, name)
	return writeUser(home, servers)
}
