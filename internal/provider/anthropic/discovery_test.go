package anthropic_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/provider"
	"github.com/agentd-dev/agentd/internal/provider/anthropic"
	"github.com/agentd-dev/agentd/internal/provider/providertest"
)

// listed is what the stand-in's Models API lists, most recent first.
var listed = []providertest.Model{
	{ID: "claude-opus-5", MaxInputTokens: 500_000},
	{ID: "claude-sonnet-4-5", MaxInputTokens: 1_000_000},
	{ID: "claude-haiku-4-5"},
	{ID: "claude-sonnet-4-5-20250929", MaxInputTokens: 200_000},
	{ID: "claude-3-7-sonnet-latest"},
}

// discovered returns a registry holding the provider of srv wrapped by
// Discover, its listings kept in dir, and the wrapper.
func discovered(t *testing.T, srv *providertest.Server, dir string, official, follow bool) (*provider.Registry, *provider.Discovering) {
	t.Helper()
	p := newProvider(t, srv)
	if official {
		anthropic.SetOfficial(p)
	}
	d := provider.Discover(p, provider.DiscoveryConfig{Dir: dir, Follow: follow})
	t.Cleanup(func() { d.Close() })
	reg := provider.NewRegistry()
	reg.Register(d)
	return reg, d
}

func TestModelsAreListedFromTheServicePageByPageAndKeptInTheHome(t *testing.T) {
	srv := providertest.NewServer(t)
	srv.SetModels(2, listed...)
	dir := t.TempDir()
	reg, d := discovered(t, srv, dir, true, false)

	reg.Await(context.Background())
	want := []string{"claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-5", "claude-sonnet-4-5-20250929", "claude-3-7-sonnet-latest"}
	if got := d.Models(); !slices.Equal(got, want) {
		t.Errorf("models = %v, want the built-in ones listed first, then the rest of the listing: %v", got, want)
	}
	if d.ModelSource() != provider.ModelsListed {
		t.Errorf("source = %q, want %q", d.ModelSource(), provider.ModelsListed)
	}
	// Three pages of two, each after the last id of the one before, with
	// the key in x-api-key and the API's version.
	pages := srv.Listings()
	if len(pages) != 3 {
		t.Fatalf("%d listing requests, want 3: %+v", len(pages), pages)
	}
	for i, after := range []string{"", "claude-sonnet-4-5", "claude-sonnet-4-5-20250929"} {
		r := pages[i]
		if !strings.HasPrefix(r.Path, "/v1/models?") || (after != "") != strings.Contains(r.Path, "after_id="+after) {
			t.Errorf("page %d asked %s, want /v1/models after %q", i+1, r.Path, after)
		}
		if r.Header.Get("X-Api-Key") != testKey || r.Header.Get("Anthropic-Version") == "" {
			t.Errorf("page %d headers: %v", i+1, r.Header)
		}
	}
	// The service's windows win over the table's; the table's price stays.
	if info := llm.Describe(d, "claude-sonnet-4-5"); info.ContextWindow != 1_000_000 || !info.Known || info.Price == nil || info.Price.Input != 3 {
		t.Errorf("claude-sonnet-4-5: %+v", info)
	}
	if info := llm.Describe(d, "claude-haiku-4-5"); info.ContextWindow != 200_000 {
		t.Errorf("claude-haiku-4-5 without a listed window: %+v, want the table's 200000", info)
	}
	if info := llm.Describe(d, "claude-3-7-sonnet-latest"); info.Known || info.ContextWindow != llm.DefaultContextWindow {
		t.Errorf("a model nobody describes: %+v, want the default window", info)
	}
	data, err := os.ReadFile(filepath.Join(dir, "anthropic.json"))
	if err != nil || !strings.Contains(string(data), "claude-opus-5") || strings.Contains(string(data), testKey) {
		t.Fatalf("the kept listing: %v\n%s", err, data)
	}

	// A follower (a session's worker) reads the kept listing and never
	// asks the service.
	_, f := discovered(t, srv, dir, true, true)
	if got := f.Models(); !slices.Equal(got, want) {
		t.Errorf("the follower's models = %v", got)
	}
	if n := len(srv.Listings()); n != 3 {
		t.Errorf("the follower asked the service: %d listings", n)
	}
}

func TestANameTheServiceDoesNotListIsRefusedWithTheNearest(t *testing.T) {
	srv := providertest.NewServer(t)
	srv.SetModels(0, listed...)
	reg, _ := discovered(t, srv, t.TempDir(), true, false)
	reg.Await(context.Background())

	for _, ok := range []string{"claude-opus-5", "claude-sonnet-4-5-20250929", "claude-opus-5-20261101"} {
		if _, model, err := reg.Resolve("anthropic/" + ok); err != nil || model != ok {
			t.Errorf("Resolve(%s) = %q, %v", ok, model, err)
		}
	}
	_, _, err := reg.Resolve("anthropic/claude-sonet-4-5")
	var um *provider.UnknownModelError
	if !errors.As(err, &um) || !errors.Is(err, provider.ErrUnknownModel) {
		t.Fatalf("an unlisted name: %v", err)
	}
	if len(um.Nearest) == 0 || um.Nearest[0] != "claude-sonnet-4-5" || !strings.Contains(err.Error(), `did you mean claude-sonnet-4-5`) {
		t.Errorf("suggestions %v in %q", um.Nearest, err)
	}
	// claude-opus-4-6 is built in, but this key's service does not list it.
	if _, _, err := reg.Resolve("anthropic/claude-opus-4-6"); !errors.Is(err, provider.ErrUnknownModel) {
		t.Errorf("a built-in name the service does not list: %v", err)
	}
}

func TestAGatewayAtABaseURLServesAnyName(t *testing.T) {
	srv := providertest.NewServer(t)
	srv.SetModels(0, providertest.Model{ID: "bedrock-claude-sonnet"})
	reg, d := discovered(t, srv, t.TempDir(), false, false)
	reg.Await(context.Background())
	if got := d.Models(); !slices.Equal(got, []string{"bedrock-claude-sonnet"}) {
		t.Errorf("the gateway's models = %v", got)
	}
	for _, name := range []string{"bedrock-claude-sonnet", "team/claude-proxy"} {
		if _, model, err := reg.Resolve("anthropic/" + name); err != nil || model != name {
			t.Errorf("Resolve(%s) = %q, %v", name, model, err)
		}
	}
}

func TestWithoutAListingTheBuiltInModelsStand(t *testing.T) {
	srv := providertest.NewServer(t) // its listings answer 404
	reg, d := discovered(t, srv, t.TempDir(), true, false)
	reg.Await(context.Background())
	if got := d.Models(); !slices.Equal(got, anthropic.Table.IDs()) || d.ModelSource() != provider.ModelsBuiltin {
		t.Errorf("models = %v from %s", got, d.ModelSource())
	}
	if _, _, err := reg.Resolve("anthropic/claude-opus-4-6"); err != nil {
		t.Errorf("a built-in model: %v", err)
	}
	if _, _, err := reg.Resolve("anthropic/claude-opus-4.6"); err == nil || !strings.Contains(err.Error(), "did you mean claude-opus-4-6") {
		t.Errorf("a misspelt model: %v", err)
	}
	// A failed listing is not asked for again at once.
	d.Models()
	reg.Await(context.Background())
	if n := len(srv.Listings()); n != 1 {
		t.Errorf("%d listings after one failed, want 1", n)
	}
}
