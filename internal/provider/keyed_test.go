package provider_test

import (
	"context"
	"sync"
	"testing"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/provider"
)

// keyring is a Keyring whose key a test changes.
type keyring struct {
	mu          sync.Mutex
	key, source string
}

func (k *keyring) Key(string) (string, string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.key, k.source
}

func (k *keyring) set(key, source string) {
	k.mu.Lock()
	k.key, k.source = key, source
	k.mu.Unlock()
}

func TestKeyedPicksUpAKeyStoredAfterItWasBuilt(t *testing.T) {
	keys := &keyring{}
	var builtWith []string
	p := provider.Keyed("anthropic", "ANTHROPIC_API_KEY", keys, func(key string) llm.Provider {
		builtWith = append(builtWith, key)
		return keyed{&stub{name: "anthropic", models: []string{"m"}, key: key, env: "ANTHROPIC_API_KEY"}}
	})
	reg := provider.NewRegistry()
	reg.Register(provider.WithRetry(p, provider.DefaultRetryPolicy()))
	if _, _, err := reg.Resolve("anthropic/m"); err == nil {
		t.Fatal("resolved with no key")
	}
	if info := reg.Available()[0]; info.Configured || info.Source != "" || info.Env != "ANTHROPIC_API_KEY" {
		t.Fatalf("without a key: %+v", info)
	}
	keys.set("sk-stored", provider.SourceFile)
	got, _, err := reg.Resolve("anthropic/m")
	if err != nil {
		t.Fatalf("with a stored key: %v", err)
	}
	if _, err := got.Stream(context.Background(), llm.Request{}, func(llm.Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if info := reg.Available()[0]; !info.Configured || info.Source != provider.SourceFile {
		t.Fatalf("with a stored key: %+v", info)
	}
	keys.set("", "")
	if _, _, err := reg.Resolve("anthropic/m"); err == nil {
		t.Fatal("resolved after the key was removed")
	}
	if len(builtWith) != 3 || builtWith[1] != "sk-stored" {
		t.Fatalf("built with %q: want one build per change of key", builtWith)
	}
}
