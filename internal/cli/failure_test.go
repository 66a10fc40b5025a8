package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/protocol"
)

func writeScript(t *testing.T, p *place, script string) {
	t.Helper()
	path := filepath.Join(filepath.Dir(p.home), "script.json")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	p.extraEnv = append(p.extraEnv, "AGENTD_FAUX_SCRIPT="+path)
}

func TestProviderErrorFailsTheTurnWithItsCause(t *testing.T) {
	p := newSessionPlace(t)
	writeScript(t, p, `{"replies":[{"steps":[{"text":"Half a"},{"error":{"status":400,"message":"scripted bad request"}}]}]}`)
	out, errOut, code := p.run("run", "--cwd", p.workDir(), "hello")
	if code != 1 || !strings.Contains(errOut, "scripted bad request") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if st := p.statusJSON(); st.State != protocol.StateReady {
		t.Fatalf("host state %q", st.State)
	}
}

func TestTornTranscriptTailIsKeptAsideAndTheSessionGoesOn(t *testing.T) {
	p := newSessionPlace(t)
	id := strings.TrimSpace(p.mustRun("new", "--id", "torn", "--cwd", p.workDir()))
	p.mustRun("run", "--session", id, "hello")
	path := filepath.Join(p.home, "sessions", id, "transcript.jsonl")
	waitGone(t, filepath.Join(p.home, "workers", id+".json")) // the worker has let go of it
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := `{"seq":99,"time":"2026-`
	f.WriteString(torn)
	f.Close()
	if out, errOut, code := p.run("run", "--session", id, "again"); code != 0 {
		t.Fatalf("after a torn tail: exit %d\n%s\n%s", code, out, errOut)
	}
	aside, _ := filepath.Glob(path + ".damaged-*")
	if len(aside) != 1 {
		t.Fatalf("damaged bytes kept in %v", aside)
	}
	if b, _ := os.ReadFile(aside[0]); string(b) != torn {
		t.Fatalf("kept %q, want %q", b, torn)
	}
	if log := p.mustRun("log", id); !strings.Contains(log, "again") || strings.Count(log, "completed") != 2 {
		t.Fatalf("log:\n%s", log)
	}
}

func TestSessionWithAnUnreadableHeaderIsListedAsDamaged(t *testing.T) {
	p := newSessionPlace(t)
	dir := filepath.Join(p.home, "sessions", "broken")
	os.MkdirAll(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "header.json"), []byte("{{{ not json"), 0o600)
	var rows []protocol.Session
	if err := json.Unmarshal([]byte(p.mustRun("ls", "--json")), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].SessionID != "broken" || !rows[0].Damaged {
		t.Fatalf("ls: %+v", rows)
	}
	if _, errOut, code := p.run("run", "--session", "broken", "hi"); code != 1 || !strings.Contains(errOut, "damaged") {
		t.Fatalf("run on a damaged session: exit %d %s", code, errOut)
	}
}

func TestDiskFullWhileAppendingFailsTheTurnAndKeepsTheTranscriptReadable(t *testing.T) {
	p := newPlace(t) // the worker stays between runs
	id := strings.TrimSpace(p.mustRun("new", "--id", "full", "--cwd", p.workDir()))
	p.mustRun("run", "--session", id, "hello")
	pid := workerPID(t, p, id)
	path := filepath.Join(p.home, "sessions", id, "transcript.jsonl")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	limit := uint64(fi.Size()) + 4096
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: limit, Max: limit}, nil); err != nil {
		t.Skipf("cannot limit the worker's file size: %v", err)
	}
	out, errOut, code := p.run("run", "--session", id, "--approve", "all", "run `seq 1 20000`")
	if code != 1 || !strings.Contains(errOut, "transcript") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if st := p.statusJSON(); st.State != protocol.StateReady {
		t.Fatalf("host state %q", st.State)
	}
	log := p.mustRun("log", id)
	if !strings.Contains(log, "hello") || !strings.Contains(log, "seq 1 20000") {
		t.Fatalf("log after the failed append:\n%s", log)
	}
}
