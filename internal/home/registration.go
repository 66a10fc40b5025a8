package home

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"github.com/agentd-dev/agentd/protocol"
	"golang.org/x/sys/unix"
)

const noFollow = unix.O_NOFOLLOW

// WriteRegistration publishes r in the runtime directory dir, at
// protocol.RegistrationPath(dir, r.HostID). It writes the JSON to
// "<path>.tmp-<pid>" (mode 0600) and renames it over the record, so a reader
// sees the old record or the new one, never a part. The runtime directory is
// not durable storage, so the file is not fsynced.
func WriteRegistration(dir string, r protocol.Registration) error {
	if err := protocol.ValidHostID(r.HostID); err != nil {
		return fmt.Errorf("write registration: %w", err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("write registration: %w", err)
	}
	b = append(b, '\n')
	path := protocol.RegistrationPath(dir, r.HostID)
	tmp := path + ".tmp-" + strconv.Itoa(os.Getpid())
	if err := writeFile(tmp, b); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write registration: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write registration: %w", err)
	}
	return nil
}

func writeFile(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|noFollow, 0o600)
	if err != nil {
		return err
	}
	// A leftover temp file of an earlier process with our pid keeps its
	// mode through O_TRUNC; set it.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadRegistration reads the registration record at path. A record whose
// host id is not valid is an error.
func ReadRegistration(path string) (protocol.Registration, error) {
	var r protocol.Registration
	b, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("read registration: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return protocol.Registration{}, fmt.Errorf("read registration %s: %w", path, err)
	}
	if err := protocol.ValidHostID(r.HostID); err != nil {
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
