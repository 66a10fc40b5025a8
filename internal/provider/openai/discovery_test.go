package openai_test

import (
	"context"
	"slices"
	"testing"

	"github.com/agentd-dev/agentd/internal/provider"
	"github.com/agentd-dev/agentd/internal/provider/openai"
	"github.com/agentd-dev/agentd/internal/provider/providertest"
)

func TestOpenAIsListingKeepsTheChatModelsAndAServersKeepsAll(t *testing.T) {
	models := []providertest.Model{{ID: "gpt-5"}, {ID: "text-embedding-3-large"}, {ID: "gpt-6"}, {ID: "whisper-1"}, {ID: "o4-mini"}}
	for _, tc := range []struct {
		name     string
		official bool
		want     []string
	}{
		{"OpenAI's own", true, []string{"gpt-5", "o4-mini", "gpt-6"}},
		{"a server at a base URL", false, []string{"gpt-5", "o4-mini", "text-embedding-3-large", "gpt-6", "whisper-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := providertest.NewServer(t)
			srv.SetModels(0, models...)
			p := openai.New(openai.Config{APIKey: testKey, BaseURL: srv.URL + "/v1", HTTPClient: srv.HTTPClient()})
			if tc.official {
				openai.SetOfficial(p)
			}
			d := provider.Discover(p, provider.DiscoveryConfig{Dir: t.TempDir()})
			defer d.Close()
			d.Models()
			d.Await(context.Background())
			if got := d.Models(); !slices.Equal(got, tc.want) {
				t.Errorf("models = %v, want %v", got, tc.want)
			}
			l := srv.Listings()
			if len(l) != 1 || l[0].Path != "/v1/models" || l[0].Header.Get("Authorization") != "Bearer "+testKey {
				t.Errorf("listings: %+v", l)
			}
		})
	}
}
