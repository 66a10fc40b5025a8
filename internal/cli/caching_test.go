package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/internal/provider/providertest"
	"github.com/agentd-dev/agentd/protocol"
)

// A turn on Anthropic's API sends its prompt with caching breakpoints, and
// `agentd log` shows what the reply read from the cache and what it cost.
func TestLogShowsCacheReadsAndTheCostOfATurnOnAnthropic(t *testing.T) {
	p := newSessionPlace(t)
	body, err := os.ReadFile(filepath.Join("..", "provider", "anthropic", "testdata", "usage_cache.sse"))
	if err != nil {
		t.Fatal(err)
	}
	fake := providertest.NewServer(t, providertest.Response{Body: string(body)})
	p.extraEnv = append(append(p.extraEnv, noKeys...), "ANTHROPIC_API_KEY=sk-ant-test-not-a-key", "ANTHROPIC_BASE_URL="+fake.URL)
	p.mustRun("run", "--cwd", p.workDir(), "--model", "anthropic/claude-sonnet-4-5", "hi")

	reqs := fake.Requests()
	if len(reqs) != 1 || strings.Count(string(reqs[0].Body), `"cache_control":{"type":"ephemeral"}`) < 2 {
		t.Fatalf("the request carries no caching breakpoints: %d requests\n%s", len(reqs), reqs[0].Body)
	}
	var sessions []protocol.Session
	if err := json.Unmarshal([]byte(p.mustRun("ls", "--json")), &sessions); err != nil || len(sessions) != 1 {
		t.Fatalf("sessions: %v %v", sessions, err)
	}
	out := p.mustRun("log", sessions[0].SessionID)
	// 12×3 + 250×15 + 8000×0.30 + 2000×3.75 dollars per million tokens.
	for _, want := range []string{"10,012 tokens in (8,000 read from the cache, 2,000 written to the cache)", "250 out", "$0.0137"} {
		if !strings.Contains(out, want) {
			t.Errorf("log does not say %q:\n%s", want, out)
		}
	}
}
