package cli_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/internal/provider/providertest"
)

func anthropicFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "provider", "anthropic", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A rate limit and an overload are retried, each wait shown live by
// `agentd run` before the reply that came after.
func TestRunShowsAModelCallRetriedAndItsReply(t *testing.T) {
	p := newSessionPlace(t)
	fake := providertest.NewServer(t,
		providertest.Response{Status: 429, Body: anthropicFixture(t, "error_429.json"), Header: map[string]string{"Retry-After-Ms": "20"}},
		providertest.Response{Status: 529, Body: anthropicFixture(t, "error_529.json"), Header: map[string]string{"Retry-After-Ms": "20"}},
		providertest.Response{Body: anthropicFixture(t, "text.sse")},
	)
	p.extraEnv = append(append(p.extraEnv, noKeys...), "ANTHROPIC_API_KEY=sk-ant-test-not-a-key", "ANTHROPIC_BASE_URL="+fake.URL)
	out := p.mustRun("run", "--cwd", p.workDir(), "--model", "anthropic/claude-sonnet-4-5", "hi")
	first := strings.Index(out, "retrying in 1s: anthropic: rate limited (HTTP 429) (attempt 1 of 6 failed)")
	second := strings.Index(out, "retrying in 1s: anthropic: overloaded (HTTP 529) (attempt 2 of 6 failed)")
	reply := strings.Index(out, "Hello, world.")
	if first < 0 || second < first || reply < second {
		t.Errorf("run does not show both retries, then the reply:\n%s", out)
	}
	if n := len(fake.Requests()); n != 3 {
		t.Errorf("the model endpoint got %d requests, want 3", n)
	}
}

// A failure no retry gets past ends the turn at once, with the provider's
// own words.
func TestRunEndsAtOnceOnAFailureNotWorthRetrying(t *testing.T) {
	p := newSessionPlace(t)
	fake := providertest.NewServer(t, providertest.Response{Status: 400, Body: anthropicFixture(t, "error_400.json")})
	p.extraEnv = append(append(p.extraEnv, noKeys...), "ANTHROPIC_API_KEY=sk-ant-test-not-a-key", "ANTHROPIC_BASE_URL="+fake.URL)
	out, errOut, code := p.run("run", "--cwd", p.workDir(), "--model", "anthropic/claude-sonnet-4-5", "hi")
	if code == 0 || !strings.Contains(out+errOut, "anthropic: invalid request: model: claude-nonexistent is not a known model (HTTP 400)") {
		t.Errorf("exit %d, output:\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(out+errOut, "retrying") {
		t.Errorf("a 400 was retried:\n%s", out)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("the model endpoint got %d requests, want 1", n)
	}
}

// An editor sees a model call's retry as the agent's thought, apart from
// the answer that comes after it.
func TestACPShowsAModelCallRetriedAsAThought(t *testing.T) {
	p := newPlace(t)
	fake := providertest.NewServer(t,
		providertest.Response{Status: 529, Body: anthropicFixture(t, "error_529.json"), Header: map[string]string{"Retry-After-Ms": "20"}},
		providertest.Response{Body: anthropicFixture(t, "text.sse")},
	)
	p.extraEnv = append(append(p.extraEnv, noKeys...), "ANTHROPIC_API_KEY=sk-ant-test-not-a-key", "ANTHROPIC_BASE_URL="+fake.URL)
	ctx := agentdtest.Context(t)
	e := p.editor(allowOnce)
	sess, err := e.conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: t.TempDir(), McpServers: []sdk.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	if _, err := e.conn.Prompt(ctx, sdk.PromptRequest{SessionId: sess.SessionId, Prompt: []sdk.ContentBlock{sdk.TextBlock("hi")}}); err != nil {
		t.Fatalf("session/prompt: %v", err)
	}
	live := e.seen()
	retry := slices.IndexFunc(live, func(l string) bool {
		return strings.HasPrefix(l, "thought retrying in 1s: anthropic: overloaded (HTTP 529) (attempt 1 of 6 failed)")
	})
	answer := slices.IndexFunc(live, func(l string) bool { return strings.Contains(l, "Hello") && !strings.HasPrefix(l, "thought") })
	if retry < 0 || answer < retry {
		t.Errorf("the editor did not see the retry as a thought before the answer:\n%s", strings.Join(live, "\n"))
	}
}
