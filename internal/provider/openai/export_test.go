package openai

// SetOfficial makes p price its replies as OpenAI's own API does, for a
// test whose endpoint is a local stand-in for it.
func SetOfficial(p *Provider) { p.official = true }
