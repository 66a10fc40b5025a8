package client_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/protocol"
)

func TestDiscoverOfMissingDirectoryIsEmpty(t *testing.T) {
	hosts, err := client.Discover(t.Context(), filepath.Join(t.TempDir(), "missing"))
	if err != nil || len(hosts) != 0 {
		t.Fatalf("Discover = %v, %v; want none, nil", hosts, err)
	}
}

func TestDiscoverListsLiveHostsSortedByID(t *testing.T) {
	dir := agentdtest.ShortDir(t)
	for _, id := range []string{"c", "a", "b-1", "a-2"} {
		agentdtest.Listen(t, dir, id)
		agentdtest.WriteRegistration(t, dir, agentdtest.Registration(dir, id, os.Getpid()))
	}
	hosts, err := client.Discover(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, h := range hosts {
		ids = append(ids, h.HostID)
		if h.RegistrationPath != protocol.RegistrationPath(dir, h.HostID) {
			t.Errorf("%s: RegistrationPath = %s", h.HostID, h.RegistrationPath)
		}
		if h.PID != os.Getpid() || h.State != protocol.StateReady {
			t.Errorf("%s: registration %+v", h.HostID, h.Registration)
		}
	}
	if got, want := strings.Join(ids, ","), "a,a-2,b-1,c"; got != want {
		t.Errorf("hosts %s; want %s", got, want)
	}
}

func TestDiscoverSkipsDeadHostsAndCorruptRecordsAndChangesNothing(t *testing.T) {
	dir := agentdtest.ShortDir(t)
	agentdtest.Listen(t, dir, "live")
	agentdtest.WriteRegistration(t, dir, agentdtest.Registration(dir, "live", os.Getpid()))
	// A socket that refuses connections, and no socket at all: dead hosts.
	agentdtest.StaleSocket(t, dir, "refused")
	agentdtest.WriteRegistration(t, dir, agentdtest.Registration(dir, "refused", os.Getpid()))
	agentdtest.WriteRegistration(t, dir, agentdtest.Registration(dir, "nosock", os.Getpid()))
	// Not registrations of live hosts: a corrupt record, one without an
	// endpoint, one naming another host, a writer's temporary file, and
	// other files.
	noEndpoint := agentdtest.Registration(dir, "noendpoint", os.Getpid())
	noEndpoint.Endpoint = ""
	files := map[string]string{
		"corrupt.json":        "{not json",
		"noendpoint.json":     agentdtest.MustJSON(t, noEndpoint),
		"other.json":          agentdtest.MustJSON(t, agentdtest.Registration(dir, "live", os.Getpid())),
		"live.json.tmp-12345": "{",
		"notes.txt":           "hello",
		"-notanid.json":       "{}",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	before, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}

	hosts, err := client.Discover(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != 1 || hosts[0].HostID != "live" {
		t.Fatalf("hosts = %+v; want only live", hosts)
	}
	after, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("Discover changed the directory: %d entries before, %d after", len(before), len(after))
	}
}

func TestFindHostFindsALiveHostAndOnlyThat(t *testing.T) {
	dir := agentdtest.ShortDir(t)
	agentdtest.Listen(t, dir, "h1")
	agentdtest.WriteRegistration(t, dir, agentdtest.Registration(dir, "h1", os.Getpid()))
	agentdtest.StaleSocket(t, dir, "h2")
	agentdtest.WriteRegistration(t, dir, agentdtest.Registration(dir, "h2", os.Getpid()))

	info, err := client.FindHost(t.Context(), dir, "h1")
	if err != nil || info.HostID != "h1" || info.PID != os.Getpid() || info.RegistrationPath != protocol.RegistrationPath(dir, "h1") {
		t.Fatalf("FindHost(h1) = %+v, %v", info, err)
	}
	for _, id := range []string{"h2", "h3"} {
		if _, err := client.FindHost(t.Context(), dir, id); !errors.Is(err, client.ErrNoHost) {
			t.Errorf("FindHost(%s) = %v; want ErrNoHost", id, err)
		}
	}
	if _, err := client.FindHost(t.Context(), dir, "../h1"); err == nil || !strings.Contains(err.Error(), "host id") {
		t.Errorf("FindHost of a bad id = %v; want an error naming the host id", err)
	}
}

func TestReadRegistrationNamesWhatIsWrong(t *testing.T) {
	dir := agentdtest.ShortDir(t)
	if _, err := client.ReadRegistration(dir, "h1"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no record: %v; want fs.ErrNotExist", err)
	}
	noPID := agentdtest.Registration(dir, "h1", 0)
	agentdtest.WriteRegistration(t, dir, noPID)
	if _, err := client.ReadRegistration(dir, "h1"); err == nil || !strings.Contains(err.Error(), "pid") {
		t.Errorf("a record without a pid: %v; want an error naming pid", err)
	}
	other := agentdtest.Registration(dir, "h2", os.Getpid())
	b := agentdtest.MustJSON(t, other)
	if err := os.WriteFile(protocol.RegistrationPath(dir, "h1"), []byte(b), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := client.ReadRegistration(dir, "h1"); err == nil || !strings.Contains(err.Error(), "hostId") {
		t.Errorf("a record naming another host: %v; want an error naming hostId", err)
	}
}

func TestDiscoverHonoursCancelledContext(t *testing.T) {
	dir := agentdtest.ShortDir(t)
	agentdtest.Listen(t, dir, "a")
	agentdtest.WriteRegistration(t, dir, agentdtest.Registration(dir, "a", os.Getpid()))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := client.Discover(ctx, dir); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v; want context.Canceled", err)
	}
	if !agentdtest.Exists(protocol.RegistrationPath(dir, "a")) {
		t.Error("a cancelled Discover removed a registration")
	}
}

func TestDiscoverCountsABusyHostLive(t *testing.T) {
	dir := agentdtest.ShortDir(t)
	agentdtest.BusyListener(t, dir, "h1")
	agentdtest.WriteRegistration(t, dir, agentdtest.Registration(dir, "h1", os.Getpid()))
	hosts, err := client.Discover(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != 1 || hosts[0].HostID != "h1" {
		t.Fatalf("Discover = %+v; want the busy host h1", hosts)
	}
	if !agentdtest.Exists(protocol.RegistrationPath(dir, "h1")) || !agentdtest.Exists(protocol.SocketPath(dir, "h1")) {
		t.Error("Discover removed a busy host's files")
	}
}

func TestDialWaitsForABusyHostUntilItsContextEnds(t *testing.T) {
	dir := agentdtest.ShortDir(t)
	agentdtest.BusyListener(t, dir, "h1")
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := client.Dial(ctx, protocol.SocketPath(dir, "h1"), client.Options{})
	if !errors.Is(err, syscall.EAGAIN) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v; want the host's EAGAIN, tried until the deadline", err)
	}
	if !strings.Contains(err.Error(), "too busy") {
		t.Errorf("error %q does not say the host was too busy", err)
	}
}
