package home

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/agentd-dev/agentd/internal/atomicfile"
	"github.com/agentd-dev/agentd/protocol"
)

// WriteRegistration publishes r in the runtime directory dir, at
// protocol.RegistrationPath(dir, r.HostID), mode 0600. The record is
// replaced whole (atomicfile.Write), so a reader sees the old record or the
// new one, never a part. The runtime directory is not durable storage, so
// the directory is not synced.
func WriteRegistration(dir string, r protocol.Registration) error {
	if err := protocol.ValidHostID(r.HostID); err != nil {
		return fmt.Errorf("write registration: %w", err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("write registration: %w", err)
	}
	b = append(b, '\n')
	if err := atomicfile.Write(protocol.RegistrationPath(dir, r.HostID), b, 0o600); err != nil {
		return fmt.Errorf("write registration: %w", err)
	}
	return nil
}

// ReadRegistration reads the registration record at path, decoded and
// checked by protocol.ParseRegistration.
func ReadRegistration(path string) (protocol.Registration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return protocol.Registration{}, fmt.Errorf("read registration: %w", err)
	}
	r, err := protocol.ParseRegistration(b)
	if err != nil {
		return protocol.Registration{}, fmt.Errorf("read registration %s: %w", path, err)
	}
	return r, nil
}

// RemoveRegistration removes host id's registration from dir. A missing
// record is not an error.
func RemoveRegistration(dir, hostID string) error {
	if err := protocol.ValidHostID(hostID); err != nil {
		return fmt.Errorf("remove registration: %w", err)
	}
	err := os.Remove(protocol.RegistrationPath(dir, hostID))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove registration: %w", err)
	}
	return nil
}

// RemoveStaleRegistration removes what a dead host of host id left in
// the runtime directory dir beside its socket: its registration, and the
// temporary files of a registration write that a crash cut off. Call it
// only once listening on host id's socket (see Listen), when no live host
// of that id is left to write them.
func RemoveStaleRegistration(dir, hostID string) error {
	if err := RemoveRegistration(dir, hostID); err != nil {
		return err
	}
	if err := atomicfile.RemoveLeftovers(protocol.RegistrationPath(dir, hostID)); err != nil {
		return fmt.Errorf("remove registration leftovers: %w", err)
	}
	return nil
}
