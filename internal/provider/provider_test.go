package provider_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/provider"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// stub is a provider that answers from a list of results; it stands in
// for a model service.
type stub struct {
	name   string
	models []string
	key    string // configured when set; "-" means not Configurable
	env    string

	calls   int
	results []stubResult
}

type stubResult struct {
	events []llm.Event
	err    error
}

func (s *stub) Name() string     { return s.name }
func (s *stub) Models() []string { return s.models }

func (s *stub) Stream(ctx context.Context, req llm.Request, emit func(llm.Event) error) (llm.Reply, error) {
	s.calls++
	if len(s.results) == 0 {
		return llm.Reply{Message: llm.Message{Role: llm.RoleAssistant}, StopReason: llm.StopEnd}, nil
	}
	r := s.results[0]
	s.results = s.results[1:]
	for _, ev := range r.events {
		if err := emit(ev); err != nil {
			return llm.Reply{}, err
		}
	}
	return llm.Reply{StopReason: llm.StopEnd}, r.err
}

// keyed is a stub that needs an API key.
type keyed struct{ *stub }

func (k keyed) Configured() bool  { return k.key != "" }
func (k keyed) ConfigEnv() string { return k.env }

func registry(anthropicKey string) *provider.Registry {
	reg := provider.NewRegistry()
	reg.Register(keyed{&stub{name: "anthropic", models: []string{"claude-sonnet-4-5", "claude-haiku-4-5"}, key: anthropicKey, env: "ANTHROPIC_API_KEY"}})
	reg.Register(keyed{&stub{name: "openai", models: []string{"gpt-5"}, env: "OPENAI_API_KEY"}})
	reg.Register(&stub{name: "faux", models: []string{"echo"}})
	return reg
}

func TestResolveNamesProviderAndModel(t *testing.T) {
	reg := registry("k")
	for _, tc := range []struct{ spec, provider, model string }{
		{"anthropic/claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5"},
		{" faux/echo ", "faux", "echo"},
	} {
		p, model, err := reg.Resolve(tc.spec)
		if err != nil {
			t.Errorf("Resolve(%q): %v", tc.spec, err)
			continue
		}
		if p.Name() != tc.provider || model != tc.model {
			t.Errorf("Resolve(%q) = %s, %q; want %s, %q", tc.spec, p.Name(), model, tc.provider, tc.model)
		}
	}
}

// anyModel is a stub serving any model, as an OpenAI-compatible server does.
type anyModel struct{ *stub }

func (anyModel) AnyModel() bool { return true }

func TestAModelMayHoldSlashes(t *testing.T) {
	reg := provider.NewRegistry()
	reg.Register(anyModel{&stub{name: "local", models: []string{"x"}}})
	p, model, err := reg.Resolve("local/meta-llama/Llama-3.1-8B")
	if err != nil || p.Name() != "local" || model != "meta-llama/Llama-3.1-8B" {
		t.Errorf("Resolve = %v, %q, %v", p, model, err)
	}
}

func TestResolveRefusesAModelTheProviderDoesNotList(t *testing.T) {
	reg := registry("k")
	for _, spec := range []string{"faux/nosuch", "anthropic/claude-not-listed"} {
		_, _, err := reg.Resolve(spec)
		var um *provider.UnknownModelError
		if !errors.Is(err, provider.ErrUnknownModel) || !errors.As(err, &um) {
			t.Errorf("Resolve(%q) = %v, want ErrUnknownModel", spec, err)
			continue
		}
		if !strings.Contains(err.Error(), "its models: ") || !strings.Contains(err.Error(), um.Models[0]) {
			t.Errorf("Resolve(%q) = %q: does not list the provider's models", spec, err)
		}
	}
	// A provider that serves any model takes one it does not list.
	wide := provider.NewRegistry()
	wide.Register(provider.WithRetry(anyModel{&stub{name: "openai", models: []string{"gpt-5"}}}, provider.DefaultRetryPolicy()))
	if _, model, err := wide.Resolve("openai/llama3.1"); err != nil || model != "llama3.1" {
		t.Errorf("an any-model provider: %q %v", model, err)
	}
	if !wide.Available()[0].AnyModel {
		t.Errorf("Available does not say the provider serves any model")
	}
}

func TestResolveRejectsBadSpecsClearly(t *testing.T) {
	reg := registry("")
	for _, tc := range []struct {
		spec     string
		sentinel error
		want     string
	}{
		{"mistral/large", provider.ErrUnknownProvider, `unknown provider "mistral" (known providers: anthropic, openai, faux)`},
		{"", provider.ErrUnknownProvider, "no provider given: write provider/model (known providers: anthropic, openai, faux)"},
		{"/echo", provider.ErrUnknownProvider, "no provider given"},
		{"anthropic", provider.ErrModelRequired, "provider requires a model: write anthropic/<model>, for example anthropic/claude-sonnet-4-5"},
		{"anthropic/", provider.ErrModelRequired, "provider requires a model"},
		{"faux/ ", provider.ErrModelRequired, "provider requires a model"},
		{"anthropic/claude-sonnet-4-5", provider.ErrNotConfigured, "anthropic is not configured: set ANTHROPIC_API_KEY"},
		{"openai/gpt-5", provider.ErrNotConfigured, "openai is not configured: set OPENAI_API_KEY"},
	} {
		_, _, err := reg.Resolve(tc.spec)
		if !errors.Is(err, tc.sentinel) {
			t.Errorf("Resolve(%q) = %v, want %v", tc.spec, err, tc.sentinel)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Resolve(%q) = %q, want it to say %q", tc.spec, err, tc.want)
		}
	}
	var nc *provider.NotConfiguredError
	if _, _, err := reg.Resolve("anthropic/x"); !errors.As(err, &nc) || nc.Env != "ANTHROPIC_API_KEY" {
		t.Errorf("not configured error = %+v", nc)
	}
}

func TestLookupAcceptsAnUnconfiguredProvider(t *testing.T) {
	reg := registry("")
	p, model, err := reg.Lookup("anthropic/claude-opus-4-6")
	if err != nil || p.Name() != "anthropic" || model != "claude-opus-4-6" {
		t.Errorf("Lookup = %v, %q, %v", p, model, err)
	}
	if _, _, err := reg.Lookup("anthropic"); !errors.Is(err, provider.ErrModelRequired) {
		t.Errorf("Lookup without a model = %v", err)
	}
}

func TestAvailableListsUnconfiguredProviders(t *testing.T) {
	reg := registry("")
	want := []provider.Info{
		{Name: "anthropic", Models: []string{"claude-sonnet-4-5", "claude-haiku-4-5"}, Configured: false, Env: "ANTHROPIC_API_KEY", ModelSource: provider.ModelsBuiltin},
		{Name: "openai", Models: []string{"gpt-5"}, Configured: false, Env: "OPENAI_API_KEY", ModelSource: provider.ModelsBuiltin},
		{Name: "faux", Models: []string{"echo"}, Configured: true, ModelSource: provider.ModelsBuiltin},
	}
	if got := reg.Available(); !reflect.DeepEqual(got, want) {
		t.Errorf("Available = %+v, want %+v", got, want)
	}
	if got := reg.Names(); !reflect.DeepEqual(got, []string{"anthropic", "openai", "faux"}) {
		t.Errorf("Names = %v", got)
	}
}

func TestDefaultIsFauxUntilAnotherProviderIsConfigured(t *testing.T) {
	if got := registry("").Default(); got != "faux/echo" {
		t.Errorf("Default with no key = %q, want faux/echo", got)
	}
	if got := registry("k").Default(); got != "anthropic/claude-sonnet-4-5" {
		t.Errorf("Default with a key = %q", got)
	}
	if got := provider.NewRegistry().Default(); got != "" {
		t.Errorf("Default of an empty registry = %q", got)
	}
}

func TestWithRetryKeepsConfiguration(t *testing.T) {
	reg := provider.NewRegistry()
	reg.Register(provider.WithRetry(keyed{&stub{name: "anthropic", models: []string{"m"}, env: "ANTHROPIC_API_KEY"}}, provider.DefaultRetryPolicy()))
	_, _, err := reg.Resolve("anthropic/m")
	if err == nil || err.Error() != "anthropic is not configured: set ANTHROPIC_API_KEY" {
		t.Errorf("Resolve = %v", err)
	}
}

func TestRegisterRefusesDuplicates(t *testing.T) {
	reg := provider.NewRegistry()
	reg.Register(&stub{name: "faux"})
	defer func() {
		if recover() == nil {
			t.Error("a second faux was registered")
		}
	}()
	reg.Register(&stub{name: "faux"})
}
