package catalog

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

const manySessions = 10_000

func TestOpenListsTenThousandSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 10,000 session folders")
	}
	c, home := openHome(t)
	cwd := workDir(t, "w")
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	created := make([]Header, manySessions)
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	// Many writers, so that their syncs overlap.
	for range 8 {
		wg.Go(func() {
			for {
				next.Lock()
				n := i
				i++
				next.Unlock()
				if n >= manySessions {
					return
				}
				h, err := c.Create(CreateOptions{Cwd: cwd, Title: fmt.Sprintf("session %d", n)})
				if err == nil && n%3 == 0 {
					h, err = c.Touch(h.ID, base.Add(time.Duration(n)*time.Second))
				}
				if err != nil {
					t.Error(err)
					return
				}
				created[n] = h
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	again := mustOpen(t, home)
	got := again.List(ListOptions{})
	want := make([]*Header, len(created))
	for i := range created {
		want[i] = &created[i]
	}
	assertSameHeaders(t, got, sorted(want))
	// Touched sessions come first, newest first.
	if got[0].ID != created[(manySessions-1)/3*3].ID {
		t.Errorf("first listed %s, want the last touched", got[0].ID)
	}
}

// seedHome writes n session folders into a new home directly, without the
// syncs of Create, to keep benchmark setup short.
func seedHome(tb testing.TB, n int) string {
	tb.Helper()
	home := tb.TempDir()
	cwd := tb.TempDir()
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		h := Header{
			SchemaVersion: SchemaVersion, ID: newID(), Title: fmt.Sprintf("session %d", i),
			Cwd: cwd, Model: "faux/echo", Thinking: ThinkingOff, Approval: ApprovalAsk,
			CreatedAt: base, UpdatedAt: base, LastActivityAt: base.Add(time.Duration(i) * time.Second),
			MetadataRevision: 1,
		}
		b, err := encodeHeader(h)
		if err != nil {
			tb.Fatal(err)
		}
		dir := filepath.Join(home, sessionsDir, h.ID)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, headerName), b, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	return home
}

func BenchmarkOpen10k(b *testing.B) {
	home := seedHome(b, manySessions)
	for b.Loop() {
		c, err := Open(home)
		if err != nil {
			b.Fatal(err)
		}
		if n := len(c.List(ListOptions{})); n != manySessions {
			b.Fatalf("listed %d", n)
		}
	}
}

func BenchmarkList10k(b *testing.B) {
	c := mustOpen(b, seedHome(b, manySessions))
	for b.Loop() {
		if n := len(c.List(ListOptions{})); n != manySessions {
			b.Fatalf("listed %d", n)
		}
	}
}
