package home

import (
	"os"
	"testing"
	"time"
)

func TestAWorkerRegistrationRoundTripsAndIsRemovedOnlyByItsProcess(t *testing.T) {
	dir := t.TempDir()
	r := WorkerRegistration{SessionID: "s1", PID: 42, ProcessStart: 7, Endpoint: "/run/w.sock", Epoch: "e1", StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	if err := WriteWorkerRegistration(dir, r); err != nil {
		t.Fatal(err)
	}
	path := WorkerRegistrationPath(dir, "s1")
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("registration file: %v %v", fi, err)
	}
	got, err := ReadWorkerRegistration(path)
	if err != nil || got != r {
		t.Fatalf("read %+v %v, want %+v", got, err, r)
	}
	RemoveWorkerRegistration(dir, "s1", 43)
	if _, err := os.Stat(path); err != nil {
		t.Fatal("another process's removal took the registration")
	}
	RemoveWorkerRegistration(dir, "s1", 42)
	if _, err := os.Stat(path); err == nil {
		t.Fatal("the registration outlived its process's removal")
	}
}

func TestAWorkerRegistrationOfAnotherSessionIsRefused(t *testing.T) {
	dir := t.TempDir()
	if err := WriteWorkerRegistration(dir, WorkerRegistration{SessionID: "s1", PID: 42}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(WorkerRegistrationPath(dir, "s1"), WorkerRegistrationPath(dir, "s2")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadWorkerRegistration(WorkerRegistrationPath(dir, "s2")); err == nil {
		t.Fatal("a registration naming another session was read")
	}
}
