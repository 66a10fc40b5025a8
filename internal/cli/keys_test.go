//go:build !agentd_client

package cli

import (
	"os"
	"strings"
	"testing"
)

// pipeOf returns the read end of a pipe that holds data, its write end
// closed.
func pipeOf(t *testing.T, data string) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		w.WriteString(data)
		w.Close()
	}()
	return r
}

func TestHandedKeysAreReadToTheEndAndCheckedWithoutQuotingAKey(t *testing.T) {
	keys, err := handedKeys(pipeOf(t, `{"anthropic":"sk-ant-handed-0123456789"}`))
	if err != nil || keys["anthropic"] != "sk-ant-handed-0123456789" || len(keys) != 1 {
		t.Fatalf("handedKeys = %v, %v", keys, err)
	}
	for _, c := range []struct{ data, says string }{
		{`not json`, "--keys-fd: not a JSON object"},
		{`{"Anthropic":"sk-ant-handed-0123456789"}`, `--keys-fd: not a provider name: "Anthropic"`},
		{`{"openai":"sk-with space-0123456789"}`, "--keys-fd: the openai key: not an API key: it holds spaces"},
		{`{"openai":"` + strings.Repeat("k", 70<<10) + `"}`, "--keys-fd: more than"},
	} {
		_, err := handedKeys(pipeOf(t, c.data))
		if err == nil || !strings.HasPrefix(err.Error(), c.says) || strings.Contains(err.Error(), "sk-with") {
			t.Errorf("handedKeys(%.30q): %v; want an error saying %q", c.data, err, c.says)
		}
	}
}
