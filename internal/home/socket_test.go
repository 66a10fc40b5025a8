package home

import (
	"net"
	"os"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/protocol"
)

func TestListenMakesSocket0600AndRemovesItOnClose(t *testing.T) {
	dir := t.TempDir()
	ln, err := Listen(dir, "h1")
	if err != nil {
		t.Fatal(err)
	}
	path := protocol.SocketPath(dir, "h1")
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket {
		t.Errorf("%s is %s; want a socket", path, fi.Mode())
	}
	assertMode(t, path, 0o600)
	assertNoDotFiles(t, dir)
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("socket left after Close: %v", err)
	}
}

func TestListenReplacesStaleSocketOfDeadHost(t *testing.T) {
	dir := t.TempDir()
	path := protocol.SocketPath(dir, "h1")
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("stale socket not left behind: %v", err)
	}

	ln, err := Listen(dir, "h1")
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer ln.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial the new socket: %v", err)
	}
	c.Close()
}

func TestListenRefusesLiveHostSocket(t *testing.T) {
	dir := t.TempDir()
	live, err := Listen(dir, "h1")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	_, err = Listen(dir, "h1")
	if err == nil || !strings.Contains(err.Error(), "live host") {
		t.Fatalf("err = %v; want a refusal naming a live host", err)
	}
	// The live host's socket is untouched and still answers.
	c, err := net.Dial("unix", protocol.SocketPath(dir, "h1"))
	if err != nil {
		t.Fatalf("live socket no longer answers: %v", err)
	}
	c.Close()
}

func TestListenRefusesNonSocketFile(t *testing.T) {
	dir := t.TempDir()
	path := protocol.SocketPath(dir, "h1")
	if err := os.WriteFile(path, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Listen(dir, "h1")
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("err = %v; want a refusal naming %s", err, path)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "keep me" {
		t.Errorf("file changed: %q, %v", b, err)
	}
}

func TestPeerCredIsOurs(t *testing.T) {
	dir := t.TempDir()
	ln, err := Listen(dir, "h1")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("unix", protocol.SocketPath(dir, "h1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	uid, pid, err := PeerCred(s)
	if err != nil {
		t.Fatal(err)
	}
	if int(uid) != os.Getuid() || pid != os.Getpid() {
		t.Errorf("PeerCred = uid %d, pid %d; want %d, %d", uid, pid, os.Getuid(), os.Getpid())
	}
}
