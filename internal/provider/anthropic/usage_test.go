package anthropic_test

import (
	"context"
	"math"
	"testing"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/provider/providertest"
)

// The usage of message_start, made final by message_delta's cumulative
// counts, splits the prompt into uncached, cache-read and cache-written
// tokens, and is priced for a model whose prices are known, only for one.
func TestUsageWithPromptCachingIsCountedAndPriced(t *testing.T) {
	cases := []struct {
		model  string
		priced bool
		cost   float64
	}{
		// 12×3 + 250×15 + 8000×0.30 + 2000×3.75 dollars per million tokens.
		{"claude-sonnet-4-5", true, 0.013686},
		{"claude-nosuch-9", false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.model, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.Response{File: "usage_cache.sse"})
			reply, err := newProvider(t, srv).Stream(context.Background(), llm.Request{Model: tc.model, Messages: []llm.Message{userText("hi")}}, (&providertest.Recorder{}).Emit)
			if err != nil {
				t.Fatal(err)
			}
			u := reply.Usage
			if u.InputTokens != 12 || u.OutputTokens != 250 || u.CacheReadTokens != 8000 || u.CacheWriteTokens != 2000 {
				t.Errorf("usage = %+v, want 12 in, 250 out, 8000 read from the cache, 2000 written to it", u)
			}
			if u.Priced != tc.priced || math.Abs(u.Cost-tc.cost) > 1e-12 {
				t.Errorf("cost = %v (priced %v), want %v (priced %v)", u.Cost, u.Priced, tc.cost, tc.priced)
			}
		})
	}
}
