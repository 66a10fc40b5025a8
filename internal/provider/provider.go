// Package provider holds the model providers behind llm.Provider, registered
// explicitly: a Registry that resolves "provider/model" specs, the retry
// policy every remote provider runs under (WithRetry), providers whose API
// key may change while the program runs (Keyed), and the mapping of a
// service's HTTP failures to *llm.ProviderError shared by the providers in
// the packages below it (faux, anthropic, openai).
//
// It knows nothing of sessions or the host: it is handed providers, and hands
// back the one a spec names.
package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/agentd-dev/agentd/internal/llm"
)

// Configurable is implemented by a provider that cannot be called until a
// person configures it, normally by setting an API key in the environment.
// A provider that does not implement it is always configured.
type Configurable interface {
	// Configured reports whether the provider has what it needs to call its
	// service.
	Configured() bool
	// ConfigEnv names the environment variable a person sets to configure
	// the provider, e.g. "ANTHROPIC_API_KEY".
	ConfigEnv() string
}

// AnyModel is implemented by a provider that may serve models it does not
// list: an OpenAI-compatible server at a base URL serves whatever it has.
type AnyModel interface {
	// AnyModel reports whether a model the provider does not list may be
	// asked for.
	AnyModel() bool
}

// Knower is implemented by a provider that decides itself which model
// names it accepts beyond the exact names it lists (Discovering: a name
// with a dated suffix).
type Knower interface {
	// Knows reports whether model is one the provider serves.
	Knows(model string) bool
}

// KeySourcer is implemented by a provider that can say where its API key
// comes from (see Keyed).
type KeySourcer interface {
	// KeySource returns where the key in use comes from, "" when there is
	// none.
	KeySource() string
}

// Info describes a registered provider for a model listing.
type Info struct {
	Name string `json:"name"`
	// Models are the provider's known models, best known first. A provider
	// may accept models it does not list.
	Models []string `json:"models"`
	// Configured reports whether the provider can be called now.
	Configured bool `json:"configured"`
	// Env names the environment variable that configures the provider;
	// empty for a provider that needs nothing.
	Env string `json:"env,omitempty"`
	// Source says where the provider's API key comes from (SourceEnv,
	// SourceFile); empty when it has none or needs none.
	Source string `json:"source,omitempty"`
	// AnyModel reports whether the provider accepts models it does not
	// list.
	AnyModel bool `json:"anyModel,omitempty"`
	// ModelSource says where Models come from: ModelsListed (the
	// provider's service listed them) or ModelsBuiltin.
	ModelSource string `json:"modelSource"`
}

// Registry holds the providers a program registered, in registration order.
// It is safe for concurrent use.
type Registry struct {
	mu        sync.Mutex
	providers []llm.Provider // guarded by mu; names are unique
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{}
}

// Register adds p. Registering nil, a provider with an empty name, or a
// second provider of the same name is a programming error and panics.
func (r *Registry) Register(p llm.Provider) {
	if p == nil {
		panic("provider: Register of a nil provider")
	}
	name := p.Name()
	if name == "" || strings.Contains(name, "/") {
		panic(fmt.Sprintf("provider: Register of a provider named %q", name))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.findLocked(name) != nil {
		panic(fmt.Sprintf("provider: %q registered twice", name))
	}
	r.providers = append(r.providers, p)
}

// Names returns the registered providers' names in registration order.
func (r *Registry) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.namesLocked()
}

// Get returns the provider registered under name.
func (r *Registry) Get(name string) (llm.Provider, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.findLocked(name)
	return p, p != nil
}

// Available describes every registered provider, configured or not, in
// registration order, so that a model listing can show what a person could
// turn on.
func (r *Registry) Available() []Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	infos := make([]Info, 0, len(r.providers))
	for _, p := range r.providers {
		info := Info{Name: p.Name(), Configured: true, AnyModel: anyModel(p), ModelSource: ModelsBuiltin}
		if s, ok := p.(interface{ ModelsAndSource() ([]string, string) }); ok {
			info.Models, info.ModelSource = s.ModelsAndSource()
		} else {
			info.Models = p.Models()
		}
		if c, ok := p.(Configurable); ok {
			info.Configured = c.Configured()
			info.Env = c.ConfigEnv()
		}
		if k, ok := p.(KeySourcer); ok {
			info.Source = k.KeySource()
		}
		infos = append(infos, info)
	}
	return infos
}

// Statuses describes every registered provider as Available does, without
// its models: for a status report, which asks often and shows none.
func (r *Registry) Statuses() []Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	infos := make([]Info, 0, len(r.providers))
	for _, p := range r.providers {
		info := Info{Name: p.Name(), Configured: true, AnyModel: anyModel(p)}
		if c, ok := p.(Configurable); ok {
			info.Configured = c.Configured()
			info.Env = c.ConfigEnv()
		}
		if k, ok := p.(KeySourcer); ok {
			info.Source = k.KeySource()
		}
		infos = append(infos, info)
	}
	return infos
}

// Default returns the spec of the model to use when none was chosen: the
// first model of the first configured provider other than faux, in
// registration order, and otherwise "faux/<faux's first model>". It returns
// "" when no registered provider is configured and offers a model.
func (r *Registry) Default() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var fallback string
	for _, p := range r.providers {
		models := p.Models()
		if len(models) == 0 || !configured(p) {
			continue
		}
		spec := p.Name() + "/" + models[0]
		if p.Name() == "faux" {
			if fallback == "" {
				fallback = spec
			}
			continue
		}
		return spec
	}
	return fallback
}

// Lookup finds the provider and model a "provider/model" spec names,
// without checking that the provider is configured: it is for validating a
// choice that will be used later. Its errors are *UnknownProviderError and
// *ModelRequiredError.
func (r *Registry) Lookup(spec string) (llm.Provider, string, error) {
	name, model := SplitSpec(spec)
	r.mu.Lock()
	p := r.findLocked(name)
	var known []string
	if p == nil {
		known = r.namesLocked()
	}
	r.mu.Unlock()
	if p == nil {
		return nil, "", &UnknownProviderError{Name: name, Known: known}
	}
	if model == "" {
		return nil, "", &ModelRequiredError{Provider: name, Models: p.Models()}
	}
	return p, model, nil
}

// Resolve finds the provider and model a "provider/model" spec names, ready
// to call. The model is everything after the first slash, so
// "openai/meta-llama/Llama-3.1-8B" names the model "meta-llama/Llama-3.1-8B".
// The model must be one the provider lists (or Knows), unless the provider
// serves any (AnyModel); a model it does not is refused with the nearest
// names it lists. Its errors are *UnknownProviderError, *ModelRequiredError,
// *NotConfiguredError and *UnknownModelError.
func (r *Registry) Resolve(spec string) (llm.Provider, string, error) {
	p, model, err := r.Lookup(spec)
	if err != nil {
		return nil, "", err
	}
	if c, ok := p.(Configurable); ok && !c.Configured() {
		return nil, "", &NotConfiguredError{Provider: p.Name(), Env: c.ConfigEnv()}
	}
	if anyModel(p) {
		return p, model, nil
	}
	known := false
	if k, ok := p.(Knower); ok {
		known = k.Knows(model)
	} else {
		known = slices.Contains(p.Models(), model)
	}
	if !known {
		models := p.Models()
		return nil, "", &UnknownModelError{Provider: p.Name(), Model: model, Models: models, Nearest: Suggest(model, models, 3)}
	}
	return p, model, nil
}

// Await waits until every registered provider that lists its models from
// its service has a listing, or its listing failed, or ctx ends: for a
// caller about to show or check models the first time. Asking a provider
// for its models starts its listing; Await asks each first.
func (r *Registry) Await(ctx context.Context) {
	r.mu.Lock()
	ps := slices.Clone(r.providers)
	r.mu.Unlock()
	for _, p := range ps {
		if a, ok := p.(interface{ Await(context.Context) }); ok {
			p.Models()
			a.Await(ctx)
		}
	}
}

// Close stops what the registered providers do in the background (a
// listing of models in flight) and waits for it.
func (r *Registry) Close() error {
	r.mu.Lock()
	ps := slices.Clone(r.providers)
	r.mu.Unlock()
	var errs []error
	for _, p := range ps {
		if c, ok := p.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// KeyEnvs returns the environment variables that hold the registered
// providers' keys, in registration order.
func (r *Registry) KeyEnvs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var envs []string
	for _, p := range r.providers {
		if c, ok := p.(Configurable); ok && c.ConfigEnv() != "" {
			envs = append(envs, c.ConfigEnv())
		}
	}
	return envs
}

// SplitSpec splits "provider/model" at its first slash, trimming spaces. A
// spec without a slash is all provider.
func SplitSpec(spec string) (name, model string) {
	name, model, _ = strings.Cut(strings.TrimSpace(spec), "/")
	return strings.TrimSpace(name), strings.TrimSpace(model)
}

func (r *Registry) findLocked(name string) llm.Provider {
	for _, p := range r.providers {
		if p.Name() == name {
			return p
		}
	}
	return nil
}

func (r *Registry) namesLocked() []string {
	names := make([]string, 0, len(r.providers))
	for _, p := range r.providers {
		names = append(names, p.Name())
	}
	return names
}

func anyModel(p llm.Provider) bool {
	a, ok := p.(AnyModel)
	return ok && a.AnyModel()
}

func configured(p llm.Provider) bool {
	c, ok := p.(Configurable)
	return !ok || c.Configured()
}
