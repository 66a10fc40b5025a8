package cli_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/creack/pty"
)

// TestTheStartRunsNoTmux: an agentd command on a terminal inside tmux
// starts no tmux process. lipgloss detects the terminal's colours as it
// initialises, and inside tmux that runs `tmux info`; internal/startenv
// hides TMUX from it. A tmux of the test's own, first on PATH, records
// any call.
func TestTheStartRunsNoTmux(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	if err := os.WriteFile(filepath.Join(dir, "tmux"), []byte("#!/bin/sh\necho \"$@\" >> "+calls+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "version")
	for _, kv := range os.Environ() {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "TMUX", "TERM", "COLORTERM", "NO_COLOR", "CLICOLOR_FORCE", "PATH":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, envAsCLI+"=1", "TMUX="+filepath.Join(dir, "server")+",1,0", "TERM=xterm-256color",
		"PATH="+dir+string(filepath.ListSeparator)+os.Getenv("PATH"))
	tty, err := pty.Start(cmd) // standard output a terminal, as a person's
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(tty) // ends with EIO once the command has exited
	tty.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agentd version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "agentd") {
		t.Fatalf("agentd version printed %q", out)
	}
	if b, err := os.ReadFile(calls); err == nil {
		t.Fatalf("agentd version, started on a terminal inside tmux, ran tmux: %q", b)
	}
}

// TestTheStartReadsNoTerminfo: an agentd command on a terminal reads no
// terminfo entry before it runs (lipgloss's colour detection, as it
// initialises, would; internal/startenv hides TERM from it). The entry
// of the test's terminal type is a named pipe: a reader's open of it
// waits for the test's open for writing, which tells the test.
func TestTheStartReadsNoTerminfo(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	// (A type naming no terminal the detection knows by name: one with
	// "st" in it, say, is taken for TrueColor without a look.)
	entry := filepath.Join(dir, "x", "xterm-agentd")
	if err := syscall.Mkfifo(entry, 0o644); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{}, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		f, err := os.OpenFile(entry, os.O_WRONLY, 0) // waits for a reader
		if err != nil {
			t.Error(err)
			return
		}
		read <- struct{}{} // before the reader can see the end of the entry
		f.Close()
	})
	cmd := exec.Command(os.Args[0], "version")
	for _, kv := range os.Environ() {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "TMUX", "TERM", "TERMINFO", "COLORTERM", "NO_COLOR", "CLICOLOR_FORCE":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, envAsCLI+"=1", "TERM=xterm-agentd", "TERMINFO="+dir)
	tty, err := pty.Start(cmd) // standard output a terminal, as a person's
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(tty) // ends with EIO once the command has exited
	tty.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agentd version: %v\n%s", err, out)
	}
	select {
	case <-read:
		t.Fatalf("agentd version, started on a terminal, read the terminfo entry of its TERM")
	default:
		// No reader came: be the one the writer waits for.
		f, err := os.OpenFile(entry, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
	}
	if !strings.Contains(string(out), "agentd") {
		t.Fatalf("agentd version printed %q", out)
	}
}
