package home

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/protocol"
)

func testRegistration(dir, id, state string) protocol.Registration {
	return protocol.Registration{
		SchemaVersion:      protocol.RegistrationSchemaVersion,
		HostID:             id,
		PID:                os.Getpid(),
		Endpoint:           protocol.SocketPath(dir, id),
		Home:               "/nonexistent/home",
		HostEpoch:          "epoch-1",
		State:              state,
		ProtocolMin:        1,
		ProtocolMax:        1,
		CompatibilityEpoch: 1,
		Version:            "test",
		StartedAt:          time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

func TestRegistrationRoundTripsWith0600AndNoLeftovers(t *testing.T) {
	dir := t.TempDir()
	r := testRegistration(dir, "h1", protocol.StateStarting)
	if err := WriteRegistration(dir, r); err != nil {
		t.Fatal(err)
	}
	path := protocol.RegistrationPath(dir, "h1")
	assertMode(t, path, 0o600)
	got, err := ReadRegistration(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != r {
		t.Errorf("read %+v; want %+v", got, r)
	}

	r.State = protocol.StateReady
	if err := WriteRegistration(dir, r); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadRegistration(path); err != nil || got.State != protocol.StateReady {
		t.Errorf("after replace: %+v, %v", got, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "h1.json" {
		t.Errorf("dir holds %v; want only h1.json", ents)
	}
	assertNoDotFiles(t, dir)

	if err := RemoveRegistration(dir, "h1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("registration still there: %v", err)
	}
	if err := RemoveRegistration(dir, "h1"); err != nil {
		t.Errorf("removing a missing registration: %v", err)
	}
}

func TestRegistrationReplaceIsAtomicForReaders(t *testing.T) {
	dir := t.TempDir()
	path := protocol.RegistrationPath(dir, "h1")
	states := []string{protocol.StateStarting, protocol.StateRecovering, protocol.StateReady, protocol.StateDraining}
	if err := WriteRegistration(dir, testRegistration(dir, "h1", states[0])); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readErr error
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			r, err := ReadRegistration(path)
			if err != nil || r.HostID != "h1" {
				readErr = err
				if readErr == nil {
					readErr = os.ErrInvalid
				}
				return
			}
		}
	})
	for i := range 2000 {
		if err := WriteRegistration(dir, testRegistration(dir, "h1", states[i%len(states)])); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if readErr != nil {
		t.Fatalf("a reader saw a partial record: %v", readErr)
	}
	assertNoDotFiles(t, dir)
}

func TestRegistrationRefusesInvalidHostID(t *testing.T) {
	dir := t.TempDir()
	if err := WriteRegistration(dir, testRegistration(dir, "../escape", protocol.StateReady)); err == nil {
		t.Error("WriteRegistration accepted host id ../escape")
	}
	if err := os.WriteFile(protocol.RegistrationPath(dir, "bad"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRegistration(protocol.RegistrationPath(dir, "bad")); err == nil {
		t.Error("ReadRegistration accepted a corrupt record")
	}
}
