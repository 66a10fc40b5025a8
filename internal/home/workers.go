package home

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentd-dev/agentd/internal/atomicfile"
)

// WorkerRegistration is what a session's worker publishes in the home so
// that a host, this one or the next, can find and adopt it. The worker
// writes it once it serves, again each time a host connects, and removes
// it when it exits; the host's supervisor reads it. It is agentd's own file, no part of the client
// contract.
type WorkerRegistration struct {
	SessionID string `json:"sessionId"`
	PID       int    `json:"pid"`
	// ProcessStart is the worker process's start time in clock ticks
	// since boot: with PID it names the process, so a pid reused by
	// another process is not taken for the worker.
	ProcessStart uint64 `json:"processStart,omitempty"`
	Endpoint     string `json:"endpoint"`
	// Epoch identifies this run of the worker: its generation.
	Epoch     string    `json:"epoch"`
	StartedAt time.Time `json:"startedAt"`
	// Host is the client instance of the host connection the worker
	// serves: the latest to connect, which closed those before it. It is
	// empty before a host connected, and for a worker of a version that
	// did not name its host.
	Host string `json:"host,omitempty"`
}

// WorkerRegistryDir is the folder of home where workers register.
func WorkerRegistryDir(home string) string { return filepath.Join(home, "workers") }

// WorkerRegistrationPath is where the worker of sessionID registers in home.
func WorkerRegistrationPath(home, sessionID string) string {
	return filepath.Join(WorkerRegistryDir(home), sessionID+".json")
}

// WriteWorkerRegistration publishes r in home, mode 0600, replacing the
// record whole (atomicfile.Write): a reader sees the old record or the
// new one, never a part.
func WriteWorkerRegistration(home string, r WorkerRegistration) error {
	path := WorkerRegistrationPath(home, r.SessionID)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write worker registration: %w", err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("write worker registration: %w", err)
	}
	if err := atomicfile.Write(path, b, 0o600); err != nil {
		return fmt.Errorf("write worker registration: %w", err)
	}
	return nil
}

// ReadWorkerRegistration reads the worker registration at path. A record
// that names no process, or a session other than its file's, is an error.
func ReadWorkerRegistration(path string) (WorkerRegistration, error) {
	var r WorkerRegistration
	b, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("read worker registration: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return WorkerRegistration{}, fmt.Errorf("read worker registration %s: %w", path, err)
	}
	if r.PID <= 0 || filepath.Base(path) != r.SessionID+".json" {
		return WorkerRegistration{}, fmt.Errorf("read worker registration %s: %w", path, errNotWorkerRegistration)
	}
	return r, nil
}

var errNotWorkerRegistration = errors.New("it names no worker of its session")

// RemoveWorkerRegistration removes the registration of sessionID's worker
// from home when it still names process pid: a newer worker's is kept.
func RemoveWorkerRegistration(home, sessionID string, pid int) {
	path := WorkerRegistrationPath(home, sessionID)
	if r, err := ReadWorkerRegistration(path); err == nil && r.PID == pid {
		os.Remove(path)
	}
}
