package protocol

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Environment variables that place a host's files.
const (
	EnvHome       = "AGENTD_HOME"
	EnvRuntimeDir = "AGENTD_RUNTIME_DIR"
	EnvHostID     = "AGENTD_HOST_ID"
)

// DefaultHome returns the home (durable storage root): $AGENTD_HOME, else
// $XDG_STATE_HOME/agentd, else ~/.local/state/agentd. It is made absolute.
func DefaultHome() (string, error) {
	if h := os.Getenv(EnvHome); h != "" {
		return filepath.Abs(h)
	}
	if x := os.Getenv("XDG_STATE_HOME"); x != "" {
		return filepath.Abs(filepath.Join(x, "agentd"))
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no home directory: set %s: %w", EnvHome, err)
	}
	return filepath.Join(home, ".local", "state", "agentd"), nil
}

// DefaultRuntimeDir returns the runtime directory (sockets, registrations):
// $AGENTD_RUNTIME_DIR, else $XDG_RUNTIME_DIR/agentd, else /tmp/agentd-<uid>.
func DefaultRuntimeDir() (string, error) {
	if d := os.Getenv(EnvRuntimeDir); d != "" {
		return filepath.Abs(d)
	}
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
		return filepath.Abs(filepath.Join(x, "agentd"))
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("agentd-%d", os.Getuid())), nil
}

// ValidHostID reports whether id may name a host's files: 1-64 letters,
// digits, '-' or '_', starting with a letter or digit.
func ValidHostID(id string) error {
	ok := len(id) >= 1 && len(id) <= 64
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		ok = alnum || i > 0 && (c == '-' || c == '_')
	}
	if !ok {
		return fmt.Errorf("host id %q: must be 1-64 letters, digits, '-' or '_', starting with a letter or digit", id)
	}
	return nil
}

// DefaultHostID returns $AGENTD_HOST_ID, else an id derived from the home's
// absolute path, so one home always gets the same id.
func DefaultHostID(home string) (string, error) {
	if id := os.Getenv(EnvHostID); id != "" {
		return id, ValidHostID(id)
	}
	sum := sha256.Sum256([]byte(filepath.Clean(home)))
	return "h" + hex.EncodeToString(sum[:])[:12], nil
}

// HomeLockName is the file in the home that its host holds locked (an
// exclusive flock) for as long as it owns the home. A client reads whether
// a host runs for a home from it without taking it: a shared flock tried
// without waiting fails while a host holds the home.
const HomeLockName = "host.lock"

// File name suffixes in the runtime directory.
const (
	SocketSuffix       = ".sock"
	RegistrationSuffix = ".json"
)

// SocketPath is where host id listens in dir.
func SocketPath(dir, hostID string) string { return filepath.Join(dir, hostID+SocketSuffix) }

// RegistrationPath is where host id publishes its Registration in dir.
func RegistrationPath(dir, hostID string) string {
	return filepath.Join(dir, hostID+RegistrationSuffix)
}

// HostIDOfRegistration returns the host id a registration file name
// belongs to, or "" when name is not a registration file.
func HostIDOfRegistration(name string) string {
	id, ok := strings.CutSuffix(name, RegistrationSuffix)
	if !ok || ValidHostID(id) != nil {
		return ""
	}
	return id
}

// RegistrationSchemaVersion is the version of the Registration record.
const RegistrationSchemaVersion = 1

// Registration is the record a host publishes in the runtime directory so
// clients can find it. It is replaced atomically on every state change.
//
// The record is defined here, with the wire's frames, rather than beside
// the host that writes it: clients read it to find a host, so its shape is
// part of what a client relies on (docs/protocol.md, with its JSON Schema),
// and a client in another language is written from that alone. The host
// writes it and every reader decodes it with ParseRegistration.
type Registration struct {
	SchemaVersion      int       `json:"schemaVersion"`
	HostID             string    `json:"hostId"`
	PID                int       `json:"pid"`
	Endpoint           string    `json:"endpoint"`
	Home               string    `json:"home"`
	HostEpoch          string    `json:"hostEpoch"`
	State              string    `json:"state"`
	ProtocolMin        int       `json:"protocolMin"`
	ProtocolMax        int       `json:"protocolMax"`
	CompatibilityEpoch int       `json:"compatibilityEpoch"`
	Version            string    `json:"version"`
	StartedAt          time.Time `json:"startedAt"`
}

// ParseRegistration decodes a registration record and checks the fields a
// client needs to reach its host: a valid hostId, a positive pid and an
// endpoint.
func ParseRegistration(b []byte) (Registration, error) {
	var r Registration
	if err := json.Unmarshal(b, &r); err != nil {
		return Registration{}, fmt.Errorf("registration: %w", err)
	}
	if err := ValidHostID(r.HostID); err != nil {
		return Registration{}, fmt.Errorf("registration: hostId: %w", err)
	}
	if r.PID <= 0 {
		return Registration{}, fmt.Errorf("registration: pid %d: want a process id", r.PID)
	}
	if r.Endpoint == "" {
		return Registration{}, errors.New("registration: endpoint is empty")
	}
	return r, nil
}
