package catalog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/agentd-dev/agentd/internal/atomicfile"
)

// File names under the home.
const (
	sessionsDir    = "sessions"
	headerName     = "header.json"
	transcriptName = "transcript.jsonl"
	settingsName   = "settings.json"

	// Temporary files of header and settings writes before the catalog
	// wrote through atomicfile; an older version may have left them.
	legacyHeaderTemp   = "header.json.tmp"
	legacySettingsTemp = "settings.json.tmp"

	// Folders in the sessions directory that are not sessions: a session
	// being created (renamed into place when complete) and a session being
	// removed (renamed out of place first). Neither name can be an id.
	creatingPrefix = ".creating-"
	removingPrefix = ".removing-"
)

// maxHeaderBytes bounds a header file; a larger one is damaged.
const maxHeaderBytes = 64 << 10

// removeLeftovers removes what writes of dir/name cut off before their
// rename left beside it. One process owns the home, so no write of the
// file is under way while the catalog opens.
func removeLeftovers(dir, name, legacyTemp string) error {
	if err := atomicfile.RemoveLeftovers(filepath.Join(dir, name)); err != nil {
		return err
	}
	return removeIfExists(filepath.Join(dir, legacyTemp))
}

// readFileLimited reads path, not following a symbolic link, refusing a file
// of more than limit bytes.
func readFileLimited(path string, limit int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s is a symbolic link", filepath.Base(path))
		}
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", filepath.Base(path), limit)
	}
	return b, nil
}

// removeIfExists removes path; a missing path is not an error.
func removeIfExists(path string) error {
	err := os.Remove(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
