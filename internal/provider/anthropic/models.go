package anthropic

import (
	"context"
	"net/http"
	"net/url"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/provider"
)

// Table is the one table of the Claude models agentd knows without asking
// the service, best known first: their context windows and Anthropic's
// published prices in US dollars per million tokens for the Messages
// API's standard tier, cache writes at the 5-minute rate, the one a
// cache_control block without a ttl gets. A model left out has no cost
// shown; none is guessed. The service's own listing (ListModels) adds the
// models it serves, with their windows.
var Table = provider.Table{
	{ID: "claude-sonnet-4-5", ContextWindow: 200_000, Price: &llm.Price{Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75}},
	{ID: "claude-opus-4-6", ContextWindow: 200_000, Price: &llm.Price{Input: 5, Output: 25, CacheRead: 0.50, CacheWrite: 6.25}},
	{ID: "claude-haiku-4-5", ContextWindow: 200_000, Price: &llm.Price{Input: 1, Output: 5, CacheRead: 0.10, CacheWrite: 1.25}},
}

// maxListPages bounds the pages of one listing.
const maxListPages = 50

// modelsPage is a page of the Models API's list.
type modelsPage struct {
	Data []struct {
		ID             string `json:"id"`
		DisplayName    string `json:"display_name"`
		MaxInputTokens int    `json:"max_input_tokens"`
	} `json:"data"`
	HasMore bool   `json:"has_more"`
	LastID  string `json:"last_id"`
}

// ListingScope is the service's address and a digest of the key; "" when
// the provider has no key.
func (p *Provider) ListingScope() string { return p.scope }

// ListModels asks the Models API (GET /v1/models) for the models the key
// may use, following its pages (has_more, after_id = last_id). A model's
// max_input_tokens, when the service gives it, is its context window.
func (p *Provider) ListModels(ctx context.Context) ([]provider.ListedModel, error) {
	if p.key == "" {
		return nil, &llm.ProviderError{Provider: Name, Message: "not configured: set " + APIKeyEnv}
	}
	header := http.Header{"X-Api-Key": {p.key}, "Anthropic-Version": {apiVersion}}
	var out []provider.ListedModel
	after := ""
	for range maxListPages {
		q := url.Values{"limit": {"1000"}}
		if after != "" {
			q.Set("after_id", after)
		}
		var page modelsPage
		if err := provider.GetJSON(ctx, p.client, Name, p.base+"/v1/models?"+q.Encode(), header, p.key, &page); err != nil {
			return nil, err
		}
		for _, m := range page.Data {
			if m.ID != "" {
				out = append(out, provider.ListedModel{ID: m.ID, DisplayName: m.DisplayName, ContextWindow: max(m.MaxInputTokens, 0)})
			}
		}
		if !page.HasMore || page.LastID == "" || page.LastID == after {
			return out, nil
		}
		after = page.LastID
	}
	return out, nil
}

// Describe returns the table's window and price of model.
func (p *Provider) Describe(model string) llm.ModelInfo { return Table.Describe(model) }
