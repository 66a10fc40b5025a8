package worker_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/internal/provider"
	"github.com/agentd-dev/agentd/internal/provider/openai"
	"github.com/agentd-dev/agentd/internal/provider/providertest"
	"github.com/agentd-dev/agentd/internal/transcript"
	"github.com/agentd-dev/agentd/internal/worker"
	"github.com/agentd-dev/agentd/protocol"
)

// chatReply is a reply streamed in the Chat Completions format, with the
// usage chunk stream_options.include_usage asks for.
const chatReply = `data: {"id":"c1","object":"chat.completion.chunk","created":1735689600,"model":"gpt-5","choices":[{"index":0,"delta":{"role":"assistant","content":"Done."},"finish_reason":null}],"usage":null}

data: {"id":"c1","object":"chat.completion.chunk","created":1735689600,"model":"gpt-5","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}

data: {"id":"c1","object":"chat.completion.chunk","created":1735689600,"model":"gpt-5","choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":300,"total_tokens":1500,"prompt_tokens_details":{"cached_tokens":1000}}}

data: [DONE]

`

// startChat runs a worker in cwd whose model is openai/gpt-5, served by a
// fake endpoint that answers each call with one of replies.
func startChat(t *testing.T, cwd string, replies ...string) (*running, *providertest.Server) {
	t.Helper()
	var responses []providertest.Response
	for _, r := range replies {
		responses = append(responses, providertest.Response{Body: r})
	}
	srv := providertest.NewServer(t, responses...)
	reg := provider.NewRegistry()
	reg.Register(openai.New(openai.Config{APIKey: "sk-test", BaseURL: srv.URL, HTTPClient: srv.HTTPClient()}))
	r := startWorker(t, worker.Config{
		Session:   protocol.Session{Cwd: cwd, Model: "openai/gpt-5"},
		Approval:  protocol.ApprovalAll,
		Providers: reg,
	})
	return r, srv
}

// systemOf returns the system message of a recorded chat request.
func systemOf(t *testing.T, req providertest.Request) string {
	t.Helper()
	var body struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(req.Body, &body); err != nil {
		t.Fatal(err)
	}
	for _, m := range body.Messages {
		if m.Role == "system" {
			b, _ := json.Marshal(m.Content)
			var s string
			if json.Unmarshal(b, &s) == nil {
				return s
			}
			return string(b)
		}
	}
	t.Fatalf("the request has no system message: %s", req.Body)
	return ""
}

// turnStarts returns the data of the transcript's turn_start records.
func turnStarts(t *testing.T, path string) []protocol.TurnStartData {
	t.Helper()
	c, err := transcript.ReadAll(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []protocol.TurnStartData
	for _, rec := range c.Records {
		if rec.Type == protocol.RecordTurnStart {
			var d protocol.TurnStartData
			if err := json.Unmarshal(rec.Data, &d); err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
	}
	return out
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// In a repository, the instruction files of the session's cwd and its
// parents up to the root reach the model outermost first, are recorded on
// the turn's start, and are read again at the next turn's start.
func TestProjectInstructionsReachTheModelAndAreReadAtEachTurn(t *testing.T) {
	root := t.TempDir()
	repo := filepath.Join(root, "repo")
	if err := os.MkdirAll(filepath.Join(repo, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, "AGENTS.md"), "outside the repository")
	write(t, filepath.Join(repo, "AGENTS.md"), "Indent with tabs.")
	write(t, filepath.Join(repo, "CLAUDE.md"), "shadowed by AGENTS.md")
	cwd := filepath.Join(repo, "pkg", "sub")
	write(t, filepath.Join(cwd, "CLAUDE.md"), "Answer in French.")

	r, srv := startChat(t, cwd, chatReply, chatReply)
	deltas := follow(t, r.conn)
	startTurn(t, r.conn, "t1", "hello")
	until(t, deltas, runEnd("t1"))

	sys := systemOf(t, srv.Requests()[0])
	outer, inner := strings.Index(sys, "Indent with tabs."), strings.Index(sys, "Answer in French.")
	if outer < 0 || inner < outer {
		t.Errorf("the system prompt does not carry the repository's then the cwd's instructions, in that order:\n%s", sys)
	}
	for _, absent := range []string{"outside the repository", "shadowed by AGENTS.md"} {
		if strings.Contains(sys, absent) {
			t.Errorf("the system prompt carries %q:\n%s", absent, sys)
		}
	}

	write(t, filepath.Join(cwd, "CLAUDE.md"), "Answer in Italian.")
	startTurn(t, r.conn, "t2", "again")
	until(t, deltas, runEnd("t2"))
	if sys := systemOf(t, srv.Requests()[1]); !strings.Contains(sys, "Answer in Italian.") || strings.Contains(sys, "French") {
		t.Errorf("the next turn does not see the edit:\n%s", sys)
	}

	r.stop(t)
	starts := turnStarts(t, r.transcript)
	want := []protocol.InstructionFile{
		{Path: filepath.Join(repo, "AGENTS.md"), Bytes: len("Indent with tabs.")},
		{Path: filepath.Join(cwd, "CLAUDE.md"), Bytes: len("Answer in French.")},
	}
	if len(starts) != 2 || !slices.Equal(starts[0].Instructions, want) {
		t.Fatalf("turn_start records %+v, want the first to list %+v", starts, want)
	}
	want[1].Bytes = len("Answer in Italian.")
	if !slices.Equal(starts[1].Instructions, want) {
		t.Errorf("second turn_start lists %+v, want %+v", starts[1].Instructions, want)
	}
}

// Outside a repository only the cwd's own file counts.
func TestOutsideARepositoryOnlyTheCwdsInstructionsCount(t *testing.T) {
	root := t.TempDir()
	write(t, filepath.Join(root, "AGENTS.md"), "from the parent")
	cwd := filepath.Join(root, "work")
	write(t, filepath.Join(cwd, "AGENTS.md"), "from the cwd")

	r, srv := startChat(t, cwd, chatReply)
	deltas := follow(t, r.conn)
	startTurn(t, r.conn, "t1", "hello")
	until(t, deltas, runEnd("t1"))
	if sys := systemOf(t, srv.Requests()[0]); !strings.Contains(sys, "from the cwd") || strings.Contains(sys, "from the parent") {
		t.Errorf("system prompt:\n%s", sys)
	}
	r.stop(t)
	if starts := turnStarts(t, r.transcript); len(starts) != 1 || len(starts[0].Instructions) != 1 || starts[0].Instructions[0].Path != filepath.Join(cwd, "AGENTS.md") {
		t.Errorf("turn_start records %+v", starts)
	}
}
