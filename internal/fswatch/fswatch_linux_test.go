package fswatch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestChangesWakeOnTheWatchedEntryOnly(t *testing.T) {
	dir := t.TempDir()
	w := New()
	defer w.Close()
	if w.f == nil {
		t.Skip("no inotify")
	}
	w.Entry(filepath.Join(dir, "h1.json"))

	// Another entry of the directory changes nothing.
	if err := os.WriteFile(filepath.Join(dir, "h2.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := w.Wait(t.Context(), time.Millisecond); changed || err != nil {
		t.Fatalf("wait after another entry changed = %v, %v; want a timeout", changed, err)
	}
	// A record renamed into place wakes.
	tmp := filepath.Join(dir, ".h1.json123")
	if err := os.WriteFile(tmp, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "h1.json")); err != nil {
		t.Fatal(err)
	}
	if changed, err := w.Wait(t.Context(), time.Hour); !changed || err != nil {
		t.Fatalf("wait after the record was renamed into place = %v, %v", changed, err)
	}
}

func TestChangesWatchADirectoryOnceItExists(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	w := New()
	defer w.Close()
	if w.f == nil {
		t.Skip("no inotify")
	}
	w.Entry(filepath.Join(dir, "h1.json"))
	if changed, err := w.Wait(t.Context(), time.Millisecond); changed || err != nil {
		t.Fatalf("wait on a missing directory = %v, %v; want a timeout", changed, err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// This wait watches the directory, now there, and times out.
	if changed, err := w.Wait(t.Context(), time.Millisecond); changed || err != nil {
		t.Fatalf("wait = %v, %v; want a timeout", changed, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "h1.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if changed, err := w.Wait(t.Context(), time.Hour); !changed || err != nil {
		t.Fatalf("wait after the record was written = %v, %v", changed, err)
	}
}

func TestChangesWakeWhenAWriterClosesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "host.stderr")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	w := New()
	defer w.Close()
	if w.f == nil {
		t.Skip("no inotify")
	}
	w.File(path)
	f.Close()
	if changed, err := w.Wait(t.Context(), time.Hour); !changed || err != nil {
		t.Fatalf("wait after the writer closed the file = %v, %v", changed, err)
	}
}

func TestChangesWaitEndsWithItsContext(t *testing.T) {
	w := New()
	defer w.Close()
	w.Entry(filepath.Join(t.TempDir(), "h1.json"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := w.Wait(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with an ended context = %v", err)
	}
	// Cancelled while it waits, or just before: either way it ends.
	ctx, cancel = context.WithCancel(t.Context())
	done := make(chan error)
	go func() {
		_, err := w.Wait(ctx, time.Hour)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("wait cancelled = %v", err)
	}
}

// Changed reports, without waiting, each change of the watched entry made
// before it is called, once; and always once the directory has gone.
func TestChangedReportsEachChangeMadeBeforeItOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "credentials.json")
	w := New()
	defer w.Close()
	if w.f == nil {
		t.Skip("no inotify")
	}
	w.Entry(path)
	if w.Changed() {
		t.Fatal("changed before anything changed")
	}
	if err := os.WriteFile(filepath.Join(dir, "other.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if w.Changed() {
		t.Fatal("changed after another entry of the directory changed")
	}
	steps := []struct {
		what   string
		change func() error
	}{
		{"renamed into place", func() error {
			tmp := filepath.Join(dir, ".credentials.json.tmp")
			if err := os.WriteFile(tmp, []byte("{}"), 0o600); err != nil {
				return err
			}
			return os.Rename(tmp, path)
		}},
		{"written in place", func() error { return os.WriteFile(path, []byte(`{"a":1}`), 0o600) }},
		{"removed", func() error { return os.Remove(path) }},
	}
	for _, s := range steps {
		if err := s.change(); err != nil {
			t.Fatal(err)
		}
		if !w.Changed() {
			t.Fatalf("not changed after the entry was %s", s.what)
		}
		if w.Changed() {
			t.Fatalf("changed twice after the entry was %s once", s.what)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if !w.Changed() {
			t.Fatal("not changed once the watched directory has gone")
		}
	}
}
