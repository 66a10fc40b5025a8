package openai

import (
	"context"
	"net/http"
	"strings"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/provider"
)

// Table is the one table of OpenAI's models agentd knows without asking
// the service, best known first: their context windows and OpenAI's
// published prices in US dollars per million tokens for the standard tier;
// a cached input token is priced as a cache read, and writing the cache
// costs nothing extra. A model left out, and every model of a server at
// another base URL, has no cost shown; none is guessed. The service's own
// listing (ListModels) adds the models it serves.
var Table = provider.Table{
	{ID: "gpt-5", ContextWindow: 400_000, Price: &llm.Price{Input: 1.25, Output: 10, CacheRead: 0.125}},
	{ID: "gpt-5-mini", ContextWindow: 400_000, Price: &llm.Price{Input: 0.25, Output: 2, CacheRead: 0.025}},
	{ID: "gpt-4.1", ContextWindow: 1_047_576, Price: &llm.Price{Input: 2, Output: 8, CacheRead: 0.50}},
	{ID: "o4-mini", ContextWindow: 200_000, Price: &llm.Price{Input: 1.10, Output: 4.40, CacheRead: 0.275}},
}

// notChat are words in the names of OpenAI's own models that Chat
// Completions does not serve (embeddings, speech, images, moderation):
// OpenAI's listing leaves them out. A server at another base URL lists
// what it serves, all of it kept.
var notChat = []string{"embedding", "whisper", "tts", "dall-e", "image", "moderation", "transcribe", "realtime", "audio", "davinci", "babbage", "sora"}

// modelsList is the Models API's list.
type modelsList struct {
	Data []struct {
		ID string `json:"id"`
	} `json:"data"`
}

// ListingScope is the service's address and a digest of the key; "" when
// the provider is not configured.
func (p *Provider) ListingScope() string { return p.scope }

// ListModels asks the Models API (GET /models under the base URL) for the
// models the service serves; of OpenAI's own, those Chat Completions
// serves.
func (p *Provider) ListModels(ctx context.Context) ([]provider.ListedModel, error) {
	if !p.configured {
		return nil, &llm.ProviderError{Provider: Name, Message: "not configured: set " + APIKeyEnv}
	}
	header := http.Header{}
	if p.key != "" {
		header.Set("Authorization", "Bearer "+p.key)
	}
	var list modelsList
	if err := provider.GetJSON(ctx, p.client, Name, p.base+"/models", header, p.key, &list); err != nil {
		return nil, err
	}
	var out []provider.ListedModel
	for _, m := range list.Data {
		if m.ID == "" || p.official && !chatModel(m.ID) {
			continue
		}
		out = append(out, provider.ListedModel{ID: m.ID})
	}
	return out, nil
}

func chatModel(id string) bool {
	id = strings.ToLower(id)
	for _, w := range notChat {
		if strings.Contains(id, w) {
			return false
		}
	}
	return true
}

// Describe returns the table's window and price of model; a server at
// another base URL has its own models, of which nothing is known.
func (p *Provider) Describe(model string) llm.ModelInfo {
	if !p.official {
		return llm.ModelInfo{}
	}
	return Table.Describe(model)
}
