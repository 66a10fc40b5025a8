package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/protocol"
)

// logRecords reads a session's transcript through agentd log --json.
func (p *place) logRecords(id string) []protocol.TranscriptRecord {
	p.t.Helper()
	var out []protocol.TranscriptRecord
	for line := range strings.Lines(p.mustRun("log", "--json", id)) {
		var r protocol.TranscriptRecord
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			p.t.Fatalf("log --json: %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

func (p *place) sessionCount() int {
	p.t.Helper()
	var sessions []protocol.Session
	if err := json.Unmarshal([]byte(p.mustRun("ls", "--json")), &sessions); err != nil {
		p.t.Fatalf("ls --json: %v", err)
	}
	return len(sessions)
}

func ofType(recs []protocol.TranscriptRecord, typ string) []protocol.TranscriptRecord {
	var out []protocol.TranscriptRecord
	for _, r := range recs {
		if r.Type == typ {
			out = append(out, r)
		}
	}
	return out
}

func longPrompt(i int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Request %d:", i)
	for j := range 150 {
		fmt.Fprintf(&b, " w%d", j)
	}
	return b.String()
}

func TestASessionOnA4kWindowCompactsAndLogShowsWhereBesideTheOriginals(t *testing.T) {
	p := newSessionPlace(t)
	script := filepath.Join(t.TempDir(), "window.json")
	os.WriteFile(script, []byte(`{"contextWindow": 4096}`), 0o600)
	p.extraEnv = append(p.extraEnv, "AGENTD_FAUX_SCRIPT="+script)
	dir := p.workDir()
	_, errOut, code := p.run("run", "--cwd", dir, "--approve", "all", longPrompt(1))
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	id := sessionIDFrom(t, errOut)
	var shown string
	for i := 2; len(ofType(p.logRecords(id), protocol.RecordCompaction)) == 0; i++ {
		if i > 40 {
			t.Fatal("40 turns and no compaction")
		}
		out, errOut, code := p.run("run", "--session", id, longPrompt(i))
		if code != 0 {
			t.Fatalf("run %d: exit %d: %s", i, code, errOut)
		}
		shown = out + errOut
	}
	if !strings.Contains(shown, "compacting the context (auto)") || !strings.Contains(shown, "context compacted here (automatic)") {
		t.Fatalf("the run that compacted showed:\n%s", shown)
	}
	// One more turn, sent the summary and the recent messages.
	if _, errOut, code := p.run("run", "--session", id, longPrompt(100)); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	recs := p.logRecords(id)
	var d protocol.CompactionData
	json.Unmarshal(ofType(recs, protocol.RecordCompaction)[0].Data, &d)
	bound := 4096 * protocol.DefaultCompactAt / 100
	if d.TokensAfter > bound || d.TokensBefore <= bound || d.ContextWindow != 4096 {
		t.Fatalf("compaction %+v: want from past %d tokens to within them", d, bound)
	}
	ends := ofType(recs, protocol.RecordTurnEnd)
	var last protocol.TurnEndData
	json.Unmarshal(ends[len(ends)-1].Data, &last)
	if last.Usage.InputTokens == 0 || last.Usage.InputTokens > bound {
		t.Fatalf("the turn after the compaction sent %d tokens; the bound is %d", last.Usage.InputTokens, bound)
	}
	// The log shows the originals and, where it happened, the compaction.
	log := p.mustRun("log", id)
	first := strings.Index(log, "Request 1:")
	mark := strings.Index(log, "context compacted here")
	after := strings.Index(log, "Request 100:")
	if first < 0 || mark < first || after < mark {
		t.Fatalf("log shows the first request at %d, the compaction at %d, the last request at %d:\n%s", first, mark, after, log)
	}
}

func TestAForkCopiesTheTranscriptUpToARecordAndLeavesTheOriginal(t *testing.T) {
	p := newSessionPlace(t)
	dir := p.workDir()
	_, errOut, code := p.run("run", "--cwd", dir, "--approve", "all", "--title", "original", "first question")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	id := sessionIDFrom(t, errOut)
	if _, errOut, code := p.run("run", "--session", id, "second question"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	orig := p.logRecords(id)
	at := ofType(orig, protocol.RecordTurnEnd)[0].Seq
	if _, errOut, code := p.run("fork", id, "--at", fmt.Sprint(len(orig)+5)); code != 2 || !strings.Contains(errOut, "atSequence") {
		t.Fatalf("fork past the end: exit %d %q, want a usage error naming the field", code, errOut)
	}
	fork := strings.TrimSpace(p.mustRun("fork", id, "--at", fmt.Sprint(at)))
	if fork == id || fork == "" {
		t.Fatalf("fork made %q", fork)
	}
	got := p.logRecords(fork)
	if uint64(len(got)) != at+1 || got[at].Type != protocol.RecordForked {
		t.Fatalf("the fork holds %d records, the last %q; want the %d up to the cut and a forked record", len(got), got[len(got)-1].Type, at)
	}
	for i := range at {
		if got[i].Type != orig[i].Type || string(got[i].Data) != string(orig[i].Data) || !got[i].Time.Equal(orig[i].Time) {
			t.Fatalf("record %d of the fork differs from the original's: %+v vs %+v", i+1, got[i], orig[i])
		}
	}
	if again := p.logRecords(id); len(again) != len(orig) {
		t.Fatalf("the original has %d records after the fork, had %d", len(again), len(orig))
	}
	// The fork goes its own way, remembering its first turn.
	if _, errOut, code := p.run("run", "--session", fork, "another direction"); code != 0 {
		t.Fatalf("run on the fork: exit %d: %s", code, errOut)
	}
	if log := p.mustRun("log", fork); !strings.Contains(log, "first question") || strings.Contains(log, "second question") || !strings.Contains(log, "forked from session "+id) {
		t.Fatalf("the fork's log:\n%s", log)
	}
	if ls := p.mustRun("ls"); !strings.Contains(ls, "original (branch)") {
		t.Fatalf("ls does not show the fork's title:\n%s", ls)
	}
}

// editScript writes a.txt in turn one, edits it and creates b.txt in turn
// two, each turn then answering.
const editScript = `{"replies": [
	{"steps": [{"tool": "write", "arguments": {"path": "a.txt", "content": "one\n"}}]},
	{"steps": [{"text": "wrote a"}]},
	{"steps": [{"tool": "edit", "arguments": {"path": "a.txt", "old_string": "one", "new_string": "two"}},
	           {"tool": "write", "arguments": {"path": "b.txt", "content": "new file\n"}}]},
	{"steps": [{"text": "edited a, wrote b"}]}
]}`

func TestRewindPutsBackTheFilesLaterTurnsChangedAndRefusesWhenOneChangedSince(t *testing.T) {
	// The script's replies are its worker's: the session's worker lives
	// through both turns (the default idle grace, not the short one).
	p := newPlace(t)
	script := filepath.Join(t.TempDir(), "edits.json")
	os.WriteFile(script, []byte(editScript), 0o600)
	p.extraEnv = append(p.extraEnv, "AGENTD_FAUX_SCRIPT="+script)
	dir := p.workDir()
	a, b := filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")
	_, errOut, code := p.run("run", "--cwd", dir, "--approve", "all", "write a")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	id := sessionIDFrom(t, errOut)
	if _, errOut, code := p.run("run", "--session", id, "edit a, write b"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	recs := p.logRecords(id)
	starts := ofType(recs, protocol.RecordTurnStart)
	if len(starts) != 2 || len(ofType(recs, protocol.RecordFileChange)) != 3 {
		t.Fatalf("%d turns and %d file changes recorded, want 2 and 3", len(starts), len(ofType(recs, protocol.RecordFileChange)))
	}
	second, first := starts[1].TurnID, starts[0].TurnID

	// a.txt changed on disk since the agent wrote it: rewinding the first
	// turn's files is refused, naming it, and nothing changes.
	os.WriteFile(a, []byte("changed by hand\n"), 0o644)
	sessionsBefore := p.sessionCount()
	_, errOut, code = p.run("rewind", id, "--to", first, "--files")
	if code == 0 || !strings.Contains(errOut, a) || strings.Contains(errOut, b+" (") {
		t.Fatalf("rewind over a changed file: exit %d %q; want a refusal naming %s alone", code, errOut, a)
	}
	if got, _ := os.ReadFile(a); string(got) != "changed by hand\n" || !exists(b) {
		t.Fatal("a refused rewind changed files")
	}
	if p.sessionCount() != sessionsBefore {
		t.Fatal("a refused rewind made a session")
	}

	// With a.txt as the agent left it, rewinding the second turn puts
	// a.txt back as the first turn wrote it and removes b.txt.
	os.WriteFile(a, []byte("two\n"), 0o644)
	out, errOut, code := p.run("rewind", id, "--to", second, "--files")
	if code != 0 {
		t.Fatalf("rewind: exit %d: %s", code, errOut)
	}
	branch := strings.TrimSpace(out)
	if got, _ := os.ReadFile(a); string(got) != "one\n" {
		t.Fatalf("a.txt holds %q after the rewind, want %q", got, "one\n")
	}
	if exists(b) {
		t.Fatal("b.txt, which the rewound turn created, is still there")
	}
	if !strings.Contains(errOut, "put back "+a) || !strings.Contains(errOut, "removed "+b) {
		t.Fatalf("rewind said %q", errOut)
	}
	brecs := p.logRecords(branch)
	if n := len(ofType(brecs, protocol.RecordTurnStart)); n != 1 || brecs[len(brecs)-1].Type != protocol.RecordForked {
		t.Fatalf("the branch holds %d turns, its last record %q", n, brecs[len(brecs)-1].Type)
	}
	if len(p.logRecords(id)) != len(recs) {
		t.Fatal("the rewind changed the original's transcript")
	}
}
