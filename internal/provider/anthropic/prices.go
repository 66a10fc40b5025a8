package anthropic

import "github.com/agentd-dev/agentd/internal/llm"

// prices are Anthropic's published prices of the models listed, in US
// dollars per million tokens, for the Messages API's standard tier: cache
// writes at the 5-minute rate, the one a cache_control block without a
// ttl gets. A model left out has no cost shown; none is guessed.
var prices = map[string]*llm.Price{
	"claude-sonnet-4-5": {Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75},
	"claude-opus-4-6":   {Input: 5, Output: 25, CacheRead: 0.50, CacheWrite: 6.25},
	"claude-haiku-4-5":  {Input: 1, Output: 5, CacheRead: 0.10, CacheWrite: 1.25},
}
