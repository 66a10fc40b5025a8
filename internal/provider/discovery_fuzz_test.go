package provider_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/provider"
)

// lister is a stub that lists models for a fixed scope.
type lister struct {
	stub
	scope string
}

func (l *lister) ListingScope() string { return l.scope }
func (l *lister) ListModels(context.Context) ([]provider.ListedModel, error) {
	var out []provider.ListedModel
	for _, m := range l.models {
		out = append(out, provider.ListedModel{ID: m})
	}
	return out, nil
}

// A kept listing is bytes another process wrote: whatever they are, a
// follower reading them never panics, and never offers a model without a
// name or one twice.
func FuzzKeptListing(f *testing.F) {
	f.Add(`{"scope":"https://api.example.com ab12","fetchedAt":"2026-01-01T00:00:00Z","models":[{"id":"m-1","contextWindow":5000}]}`)
	f.Add(`{"scope":"https://api.example.com ab12","models":[{"id":""},{"id":"a"},{"id":"a","contextWindow":-4}]}`)
	f.Add(`{"scope":"other","models":[{"id":"x"}]}`)
	f.Add(`[1,2`)
	f.Fuzz(func(t *testing.T, data string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "stub.json"), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		d := provider.Discover(&lister{stub: stub{name: "stub", models: []string{"builtin"}}, scope: "https://api.example.com ab12"},
			provider.DiscoveryConfig{Dir: dir, Follow: true})
		defer d.Close()
		seen := map[string]bool{}
		for _, m := range d.Models() {
			if m == "" || seen[m] {
				t.Fatalf("models %q", d.Models())
			}
			seen[m] = true
			if info := llm.Describe(d, m); info.ContextWindow <= 0 {
				t.Fatalf("%s: window %d", m, info.ContextWindow)
			}
		}
		d.Knows("a")
	})
}

func TestSuggestNamesTheNearestFirst(t *testing.T) {
	names := []string{"claude-sonnet-4-5", "claude-opus-4-6", "claude-haiku-4-5", "gpt-5"}
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"claude-sonet-4-5", []string{"claude-sonnet-4-5"}},
		{"claude-opus", []string{"claude-opus-4-6"}},
		{"Claude-Haiku-4-5", []string{"claude-haiku-4-5"}},
		{"llama3.1", nil},
	} {
		got := provider.Suggest(tc.name, names, 3)
		if len(got) < len(tc.want) || (len(tc.want) > 0 && got[0] != tc.want[0]) || (tc.want == nil && len(got) != 0) {
			t.Errorf("Suggest(%q) = %v, want %v first", tc.name, got, tc.want)
		}
	}
}
