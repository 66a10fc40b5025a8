package anthropic

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/internal/llm"
)

// FuzzStream feeds the accumulator any events, one JSON object a line, as
// Stream decodes them from a stream: it never panics, and the usage it
// reports is never negative, nor its cost.
func FuzzStream(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.sse"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		var lines []string
		for line := range strings.Lines(string(b)) {
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				lines = append(lines, data)
			}
		}
		f.Add(strings.Join(lines, ""), "claude-sonnet-4-5")
	}
	f.Add(`{"type":"message_start","message":{"usage":{"input_tokens":-5,"cache_read_input_tokens":-1}}}`+"\n"+
		`{"type":"message_delta","usage":{"output_tokens":-3,"cache_creation_input_tokens":7}}`, "claude-haiku-4-5")
	f.Fuzz(func(t *testing.T, stream, model string) {
		acc := accumulator{price: Table.Describe(model).Price}
		sc := bufio.NewScanner(strings.NewReader(stream))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev streamEvent
			if json.Unmarshal(bytes.TrimSpace(sc.Bytes()), &ev) != nil {
				continue
			}
			if err := acc.add(ev, func(llm.Event) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
		u := acc.reply().Usage
		if u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheReadTokens < 0 || u.CacheWriteTokens < 0 || u.Cost < 0 {
			t.Fatalf("usage %+v", u)
		}
	})
}
