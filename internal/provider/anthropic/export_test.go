package anthropic

// SetOfficial makes p take its service for Anthropic's own, which serves
// only the models it lists, for a test whose endpoint is a local stand-in
// for it.
func SetOfficial(p *Provider) { p.custom = false }
