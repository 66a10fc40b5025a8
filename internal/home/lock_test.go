package home

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestLockWritesHolderPIDWith0600(t *testing.T) {
	home := t.TempDir()
	l, err := Lock(home)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	b, err := os.ReadFile(filepath.Join(home, LockFileName))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file holds %q; want our pid %d", got, os.Getpid())
	}
	assertMode(t, l.Path(), 0o600)
	assertNoDotFiles(t, home)
}

func TestSecondLockInSameProcessIsRefusedUntilRelease(t *testing.T) {
	home := t.TempDir()
	l, err := Lock(home)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Lock(home)
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("second Lock: err = %v; want *HeldError", err)
	}
	if held.PID != os.Getpid() || held.Path != home {
		t.Errorf("HeldError = %+v; want pid %d path %s", held, os.Getpid(), home)
	}
	want := fmt.Sprintf("home %s is held by agentd host pid %d", home, os.Getpid())
	if err.Error() != want {
		t.Errorf("message %q; want %q", err, want)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Errorf("second Release: %v", err)
	}
	l2, err := Lock(home)
	if err != nil {
		t.Fatalf("Lock after Release: %v", err)
	}
	l2.Release()
}

func TestHeldLockWithUnreadablePIDSaysAnotherHost(t *testing.T) {
	home := t.TempDir()
	l, err := Lock(home)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if err := os.Truncate(l.Path(), 0); err != nil {
		t.Fatal(err)
	}
	_, err = Lock(home)
	var held *HeldError
	if !errors.As(err, &held) || held.PID != 0 {
		t.Fatalf("err = %v; want *HeldError with pid 0", err)
	}
	if want := "home " + home + " is held by another agentd host"; err.Error() != want {
		t.Errorf("message %q; want %q", err, want)
	}
}

const helperEnv = "AGENTD_HOME_TEST_HELPER"

// TestHelperProcess is not a test: run as a child with helperEnv set to a
// home, it locks that home, says "locked" on stdout, and holds the lock
// until its stdin closes.
func TestHelperProcess(t *testing.T) {
	home := os.Getenv(helperEnv)
	if home == "" {
		return
	}
	l, err := Lock(home)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin)
	l.Release()
	os.Exit(0)
}

func TestLockHeldByAnotherProcessReportsItsPID(t *testing.T) {
	home := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"="+home)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "locked\n" {
		t.Fatalf("helper said %q, %v", line, err)
	}

	_, err = Lock(home)
	var held *HeldError
	if !errors.As(err, &held) {
		t.Fatalf("Lock: err = %v; want *HeldError", err)
	}
	if held.PID != cmd.Process.Pid {
		t.Errorf("HeldError.PID = %d; want helper pid %d", held.PID, cmd.Process.Pid)
	}
	if want := fmt.Sprintf("held by agentd host pid %d", cmd.Process.Pid); !strings.Contains(err.Error(), want) {
		t.Errorf("message %q lacks %q", err, want)
	}

	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	l, err := Lock(home)
	if err != nil {
		t.Fatalf("Lock after the helper exited: %v", err)
	}
	l.Release()
}

func TestARefusedLockNamesTheSocketTheHolderAnnounced(t *testing.T) {
	home := t.TempDir()
	l, err := Lock(home)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	sock := filepath.Join(t.TempDir(), "h1.sock")
	if err := l.Announce(sock); err != nil {
		t.Fatal(err)
	}
	_, err = Lock(home)
	var held *HeldError
	if !errors.As(err, &held) || held.PID != os.Getpid() || held.Endpoint != sock {
		t.Fatalf("second Lock: %+v %v", held, err)
	}
	if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("pid %d", os.Getpid())) || !strings.Contains(msg, sock) {
		t.Errorf("message %q names no pid or socket", msg)
	}
}
