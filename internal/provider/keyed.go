package provider

import (
	"context"
	"sync"

	"github.com/agentd-dev/agentd/internal/llm"
)

// Where a key comes from (Info.Source, KeySourcer).
const (
	// SourceEnv is a key in the process's environment.
	SourceEnv = "environment"
	// SourceFile is a key a person stored in the home's credentials file.
	SourceFile = "credentials file"
)

// Keyring gives a provider's API key as it is now.
type Keyring interface {
	// Key returns the key of the provider named name and where it comes
	// from (SourceEnv, SourceFile); "", "" when it has none.
	Key(name string) (key, source string)
}

// Keyed returns a provider whose API key may change while the program
// runs: each call asks keys for the provider's key and, when it is not the
// one in use, builds the provider anew with build(key), so a key stored
// after the program started is used from the next call on. build(""),
// the provider without a key, answers Configured until a key comes.
//
// name and keyEnv are the provider's name and the environment variable its
// key is set in. The returned provider is Configurable, AnyModel and
// KeySourcer, answering for the provider as it is at the call.
func Keyed(name, keyEnv string, keys Keyring, build func(key string) llm.Provider) llm.Provider {
	return &keyed{name: name, keyEnv: keyEnv, keys: keys, build: build}
}

type keyed struct {
	name, keyEnv string                        // constant
	keys         Keyring                       // constant
	build        func(key string) llm.Provider // constant

	mu     sync.Mutex
	built  bool         // guarded by mu: whether cur was built
	key    string       // guarded by mu: the key cur was built with
	cur    llm.Provider // guarded by mu
	source string       // guarded by mu: where key came from
}

// current returns the provider built with the key in force now.
func (k *keyed) current() (llm.Provider, string) {
	key, source := k.keys.Key(k.name)
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.built || key != k.key {
		k.cur, k.key, k.built = k.build(key), key, true
	}
	k.source = source
	return k.cur, k.source
}

func (k *keyed) Name() string { return k.name }

func (k *keyed) Models() []string {
	p, _ := k.current()
	return p.Models()
}

// Configured reports whether the provider as it is now can be called.
func (k *keyed) Configured() bool {
	p, _ := k.current()
	return configured(p)
}

// ConfigEnv names the environment variable of the provider's key.
func (k *keyed) ConfigEnv() string { return k.keyEnv }

// AnyModel reports whether the provider as it is now serves models it does
// not list.
func (k *keyed) AnyModel() bool {
	p, _ := k.current()
	return anyModel(p)
}

// KeySource says where the key in use comes from.
func (k *keyed) KeySource() string {
	_, source := k.current()
	return source
}

// ListingScope names whom the listing of the provider as it is now is
// for.
func (k *keyed) ListingScope() string {
	p, _ := k.current()
	return listingScope(p)
}

// ListModels lists the models of the provider as it is now.
func (k *keyed) ListModels(ctx context.Context) ([]ListedModel, error) {
	p, _ := k.current()
	return listModels(ctx, p)
}

// Describe returns what the provider as it is now knows of model.
func (k *keyed) Describe(model string) llm.ModelInfo {
	p, _ := k.current()
	return llm.Describe(p, model)
}

func (k *keyed) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Reply, error) {
	p, _ := k.current()
	return p.Stream(ctx, req, emit)
}
