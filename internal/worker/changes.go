package worker

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentd-dev/agentd/internal/atomicfile"
	"github.com/agentd-dev/agentd/internal/tools"
	"github.com/agentd-dev/agentd/protocol"
)

// What the agent's write and edit tools change is recorded, for a rewind
// to put back: a file_change record in the transcript, and the content
// before kept in the session's folder (protocol.ChangesDir), named by its
// SHA-256, out of the reach of the agent's commands as the whole home is.

// changesDir returns the folder that keeps the content before changes.
func (s *session) changesDir() string {
	return filepath.Join(filepath.Dir(s.log.Path()), protocol.ChangesDir)
}

// recordChange records a change t's tools made. A change that cannot be
// recorded is logged: the tool's work is done, and only a rewind of it
// is lost.
func (s *session) recordChange(t *turn, c tools.FileChange) {
	d := protocol.FileChangeData{
		Path: c.Path, Tool: c.Tool, CallID: c.CallID, Existed: c.Existed, BeforeBytes: c.BeforeSize, NotKept: c.TooLarge,
		After: hashOf(c.After),
	}
	if c.Existed && !c.TooLarge {
		d.Before = hashOf(c.Before)
		if err := keep(s.changesDir(), d.Before, c.Before); err != nil {
			s.logger.Warn("the content of a file before a change cannot be kept; a rewind cannot put it back", "path", c.Path, "err", err)
			d.Before, d.NotKept = "", true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.appendLocked(protocol.RecordFileChange, t.snap.TurnID, d); err != nil {
		s.logger.Warn("a file change cannot be recorded; a rewind cannot put it back", "path", c.Path, "err", err)
	}
}

func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// keep writes data to dir/name unless it is there already (the name is
// its hash).
func keep(dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	if _, err := os.Lstat(path); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return atomicfile.WriteDurable(path, data, 0o600)
}
