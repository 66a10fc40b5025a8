package openai_test

import (
	"context"
	"math"
	"testing"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/provider/openai"
	"github.com/agentd-dev/agentd/internal/provider/providertest"
)

// The final chunk that stream_options.include_usage asks for carries the
// usage; its cached prompt tokens are counted as cache reads, apart from
// the rest of the prompt. OpenAI's own API prices a known model; another
// server at another base URL, serving any model under any name, is never
// priced.
func TestUsageOfTheFinalChunkIsCountedAndPricedOnlyByOpenAI(t *testing.T) {
	cases := []struct {
		name     string
		official bool
		model    string
		priced   bool
		cost     float64
	}{
		// 200×1.25 + 1000×0.125 + 300×10 dollars per million tokens.
		{"a known model of OpenAI's API", true, "gpt-5", true, 0.003375},
		{"an unknown model of OpenAI's API", true, "gpt-nosuch", false, 0},
		{"a known name at another base URL", false, "gpt-5", false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := providertest.NewServer(t, providertest.Response{File: "usage_cached.sse"})
			p := newProvider(t, srv)
			if tc.official {
				openai.SetOfficial(p)
			}
			reply, err := p.Stream(context.Background(), llm.Request{Model: tc.model, Messages: []llm.Message{userText("hi")}}, (&providertest.Recorder{}).Emit)
			if err != nil {
				t.Fatal(err)
			}
			u := reply.Usage
			if u.InputTokens != 200 || u.CacheReadTokens != 1000 || u.OutputTokens != 300 || u.CacheWriteTokens != 0 {
				t.Errorf("usage = %+v, want 200 uncached in, 1000 read from the cache, 300 out", u)
			}
			if u.Priced != tc.priced || math.Abs(u.Cost-tc.cost) > 1e-12 {
				t.Errorf("cost = %v (priced %v), want %v (priced %v)", u.Cost, u.Priced, tc.cost, tc.priced)
			}
		})
	}
}
