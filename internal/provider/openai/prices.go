package openai

import "github.com/agentd-dev/agentd/internal/llm"

// prices are OpenAI's published prices of the models listed, in US
// dollars per million tokens, for the standard tier; a cached input token
// is priced as a cache read, and writing the cache costs nothing extra. A
// model left out, and every model of a server at another base URL, has no
// cost shown; none is guessed.
var prices = map[string]*llm.Price{
	"gpt-5":      {Input: 1.25, Output: 10, CacheRead: 0.125},
	"gpt-5-mini": {Input: 0.25, Output: 2, CacheRead: 0.025},
	"gpt-4.1":    {Input: 2, Output: 8, CacheRead: 0.50},
	"o4-mini":    {Input: 1.10, Output: 4.40, CacheRead: 0.275},
}
