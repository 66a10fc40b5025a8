package catalog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// File names under the home.
const (
	sessionsDir    = "sessions"
	headerName     = "header.json"
	headerTemp     = "header.json.tmp"
	transcriptName = "transcript.jsonl"
	settingsName   = "settings.json"
	settingsTemp   = "settings.json.tmp"

	// Folders in the sessions directory that are not sessions: a session
	// being created (renamed into place when complete) and a session being
	// removed (renamed out of place first). Neither name can be an id.
	creatingPrefix = ".creating-"
	removingPrefix = ".removing-"
)

// maxHeaderBytes bounds a header file; a larger one is damaged.
const maxHeaderBytes = 64 << 10

// Temp files have fixed names: one process owns the home and the catalog
// writes one file of a folder at a time, so no two writers share a name.

// writeFileAtomic replaces dir/name with data, mode 0600: it writes
// dir/tmpName, syncs it, renames it over dir/name and syncs dir. A reader —
// or a crash — sees the old file or the new one, never a part.
func writeFileAtomic(dir, name, tmpName string, data []byte) error {
	tmp := filepath.Join(dir, tmpName)
	if err := writeFileSync(tmp, data); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

// writeFileSync writes data to path, mode 0600, and syncs it. It does not
// follow a symbolic link at path.
func writeFileSync(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	// A leftover file keeps its mode through O_TRUNC; set it.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return d.Close()
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
