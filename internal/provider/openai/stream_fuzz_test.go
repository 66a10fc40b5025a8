package openai

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

// FuzzStream feeds the accumulator any chunks, one JSON object a line, as
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
			if data, ok := strings.CutPrefix(line, "data: "); ok && !strings.HasPrefix(data, "[DONE]") {
				lines = append(lines, data)
			}
		}
		f.Add(strings.Join(lines, ""), "gpt-5")
	}
	f.Add(`{"choices":[],"usage":{"prompt_tokens":-10,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":99}}}`, "gpt-4.1")
	f.Fuzz(func(t *testing.T, stream, model string) {
		acc := accumulator{price: Table.Describe(model).Price}
		emit := func(llm.Event) error { return nil }
		sc := bufio.NewScanner(strings.NewReader(stream))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var c chunk
			if json.Unmarshal(bytes.TrimSpace(sc.Bytes()), &c) != nil {
				continue
			}
			if err := acc.add(c, emit); err != nil {
				t.Fatal(err)
			}
		}
		if err := acc.finish(emit); err != nil {
			t.Fatal(err)
		}
		u := acc.reply().Usage
		if u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheReadTokens < 0 || u.CacheWriteTokens < 0 || u.Cost < 0 {
			t.Fatalf("usage %+v", u)
		}
	})
}
