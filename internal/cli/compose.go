//go:build !agentd_client

package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentd-dev/agentd/internal/credentials"
	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/provider"
	"github.com/agentd-dev/agentd/internal/provider/anthropic"
	"github.com/agentd-dev/agentd/internal/provider/faux"
	"github.com/agentd-dev/agentd/internal/provider/openai"
	"github.com/agentd-dev/agentd/internal/redact"
	"github.com/agentd-dev/agentd/protocol"
)

// EnvFauxScript scripts the built-in offline model from a file.
const EnvFauxScript = "AGENTD_FAUX_SCRIPT"

// keyring is where the providers' keys come from: the home's credentials
// file, read again whenever it changes, and otherwise the keys the host
// took from its environment, which a worker is handed by its host once it
// serves. A stored key wins: it is the one a person can change without
// restarting the host.
type keyring struct {
	file   *credentials.Store // constant
	handed chan struct{}      // constant; closed once env is set
	env    map[string]string  // set once, before handed is closed: provider → key
}

func newKeyring(home string) *keyring {
	k := &keyring{file: credentials.NewStore(home), handed: make(chan struct{})}
	k.stored()
	return k
}

// hand sets the keys from the host's environment, which redaction learns.
// Call it once.
func (k *keyring) hand(env map[string]string) {
	for _, key := range env {
		redact.Register(key)
	}
	k.env = env
	close(k.handed)
}

// envKeys returns the keys from the host's environment, once handed.
func (k *keyring) envKeys() map[string]string {
	<-k.handed
	return k.env
}

// stored returns the credentials file as it is now, its keys made known
// to redaction: no log, transcript or output of this process shows one,
// used or not.
func (k *keyring) stored() credentials.File {
	f, _ := k.file.Current()
	for _, key := range f.Keys {
		redact.Register(key)
	}
	return f
}

// takeEnvKeys takes the providers' keys out of this process's
// environment: it returns them, by provider, and unsets their variables
// and any other that holds one of them, so that no process started from
// now on (a worker, a command of the agent) inherits a key.
func takeEnvKeys() map[string]string {
	keys := map[string]string{}
	for name, v := range keyEnvs {
		if key := os.Getenv(v); key != "" {
			keys[name] = key
		}
		os.Unsetenv(v)
	}
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		for _, key := range keys {
			if value == key {
				os.Unsetenv(name)
			}
		}
	}
	return keys
}

// Key returns the key of the provider named name and where it comes from.
func (k *keyring) Key(name string) (string, string) {
	if key := k.stored().Keys[name]; key != "" {
		return key, provider.SourceFile
	}
	if key := k.envKeys()[name]; key != "" {
		return key, provider.SourceEnv
	}
	return "", ""
}

// EnvToolEnv names, separated by commas, variables of the host's
// environment the agent's commands get beside those of toolEnvNames.
const EnvToolEnv = "AGENTD_TOOL_ENV"

// toolEnvNames are the variables of the worker's environment, beside
// every LC_*, that the agent's commands get: what a shell and the usual
// command-line tools need to find programs, the user and the terminal,
// and nothing that locates agentd or holds a secret. The rest (the
// providers' keys, agentd's own AGENTD_* settings, proxies, which may
// hold a password, tokens of other tools) stays out unless a person
// names it in AGENTD_TOOL_ENV. PWD is left to the shell, which sets it
// to the command's directory.
var toolEnvNames = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL",
	"TERM", "COLORTERM", "LANG", "LANGUAGE", "TZ", "TMPDIR",
	"EDITOR", "VISUAL", "PAGER", "NO_COLOR",
	"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME",
}

// toolEnvExtra reads the names AGENTD_TOOL_ENV adds to toolEnvNames. A
// name that is no variable name, one of agentd's own (AGENTD_*) or a
// provider's key variable is refused, naming it.
func toolEnvExtra() ([]string, error) {
	var names []string
	for name := range strings.SplitSeq(os.Getenv(EnvToolEnv), ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		switch {
		case !isEnvName(name):
			return nil, fmt.Errorf("%s: %q is not a variable name (letters, digits and '_', not starting with a digit)", EnvToolEnv, name)
		case strings.HasPrefix(name, "AGENTD_"):
			return nil, fmt.Errorf("%s: %q is one of agentd's own settings, which the agent's commands never get", EnvToolEnv, name)
		case slices.Contains(slices.Collect(maps.Values(keyEnvs)), name) || strings.HasSuffix(name, "_API_KEY"):
			return nil, fmt.Errorf("%s: %q names an API key, which the agent's commands never get", EnvToolEnv, name)
		}
		names = append(names, name)
	}
	return names, nil
}

func isEnvName(name string) bool {
	for i, c := range name {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return name != ""
}

// toolEnv is the environment the agent's tools run commands with: the
// variables of this process's environment toolEnvNames and extra name,
// and LC_*, without any whose value is a key in use.
func (k *keyring) toolEnv(extra []string) []string {
	keys := map[string]bool{}
	select {
	case <-k.handed:
		for _, key := range k.env {
			keys[key] = true
		}
	default:
		// Not handed yet (a worker's shells are set up before): no
		// variable of the worker's holds one of them anyway, since the
		// host took them out of its environment before it started it.
	}
	for _, key := range k.stored().Keys {
		keys[key] = true
	}
	var env []string
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		allowed := slices.Contains(toolEnvNames, name) || slices.Contains(extra, name) || strings.HasPrefix(name, "LC_")
		if allowed && !keys[value] {
			env = append(env, kv)
		}
	}
	return env
}

// ModelListingsDir is the folder of the home that keeps the providers'
// model listings, one file per provider.
const ModelListingsDir = "models"

// providers registers the model providers, explicitly, configured from
// the environment and, for their keys, from keys. The remote ones list
// their models from their services into the home; with follow set (a
// worker) they only read what the host listed. The caller closes the
// registry.
func providers(home string, keys *keyring, follow bool) (*provider.Registry, error) {
	reg := provider.NewRegistry()
	f, err := faux.New(faux.Config{ScriptPath: os.Getenv(EnvFauxScript)})
	if err != nil {
		return nil, err
	}
	reg.Register(f)
	retry := provider.DefaultRetryPolicy()
	discovery := provider.DiscoveryConfig{Dir: filepath.Join(home, ModelListingsDir), Follow: follow}
	anthropicURL := os.Getenv(anthropic.BaseURLEnv)
	reg.Register(provider.Discover(provider.WithRetry(provider.Keyed(anthropic.Name, anthropic.APIKeyEnv, keys, func(key string) llm.Provider {
		return anthropic.New(anthropic.Config{APIKey: key, BaseURL: anthropicURL})
	}), retry), discovery))
	openaiURL := os.Getenv(openai.BaseURLEnv)
	reg.Register(provider.Discover(provider.WithRetry(provider.Keyed(openai.Name, openai.APIKeyEnv, keys, func(key string) llm.Provider {
		return openai.New(openai.Config{APIKey: key, BaseURL: openaiURL})
	}), retry), discovery))
	return reg, nil
}

// models adapts the registry to what the host's session service and the
// worker ask, saying in each refusal what a person can do about it.
type models struct {
	reg  *provider.Registry
	keys *keyring // where the keys come from; nil in a worker, which needs no default
	def  string   // the host's default model (--default-model); see Default when empty
}

// listingWait bounds how long a listing of models, or a check of a model
// no listing names yet, waits for the providers' first listings.
const listingWait = 5 * time.Second

// Available lists every registered provider's models, with where each is
// known from and its context window, those that cannot run now saying
// why. It waits, boundedly, for a provider's first listing.
func (m models) Available() []protocol.Model {
	ctx, cancel := context.WithTimeout(context.Background(), listingWait)
	m.reg.Await(ctx)
	cancel()
	var out []protocol.Model
	for _, info := range m.reg.Available() {
		why := ""
		if !info.Configured {
			why = notConfigured(info.Name, info.Env)
		}
		p, _ := m.reg.Get(info.Name)
		for _, id := range info.Models {
			model := protocol.Model{Provider: info.Name, ModelID: id, Unavailable: why, Source: protocol.ModelSourceBuiltin}
			if info.ModelSource == provider.ModelsListed {
				model.Source = protocol.ModelSourceProvider
			}
			if d := llm.Describe(p, id); d.Known {
				model.ContextWindow = d.ContextWindow
			}
			out = append(out, model)
		}
	}
	return out
}

// Providers reports every registered provider.
func (m models) Providers() []protocol.ProviderStatus {
	var out []protocol.ProviderStatus
	for _, info := range m.reg.Statuses() {
		st := protocol.ProviderStatus{Name: info.Name, Configured: info.Configured, KeySource: info.Source, KeyEnv: info.Env, AnyModel: info.AnyModel}
		if !info.Configured {
			st.Unavailable = notConfigured(info.Name, info.Env)
		}
		out = append(out, st)
	}
	return out
}

// Check reports why spec cannot be chosen. A model no listing names yet
// is checked again once the providers' first listings are in, boundedly.
func (m models) Check(spec string) error {
	_, _, err := m.Resolve(spec)
	if errors.Is(err, provider.ErrUnknownModel) {
		ctx, cancel := context.WithTimeout(context.Background(), listingWait)
		m.reg.Await(ctx)
		cancel()
		_, _, err = m.Resolve(spec)
	}
	return err
}

func (m models) Ready(spec string) error { return m.Check(spec) }

// Resolve finds the provider and model of spec, ready to call.
func (m models) Resolve(spec string) (llm.Provider, string, error) {
	p, model, err := m.reg.Resolve(spec)
	return p, model, explainModel(err)
}

// Default is the model of new sessions when none was selected: the host's
// --default-model, else the first model of the first provider the host's
// environment configures (with a key, or a server's base URL), else
// faux's. A key stored with `agentd auth set` makes its provider callable
// but never the default: storing a key changes nothing a person did not
// ask for (`agentd models select` does).
func (m models) Default() string {
	if m.def != "" {
		return m.def
	}
	fallback := ""
	for _, info := range m.reg.Available() {
		if !info.Configured || len(info.Models) == 0 {
			continue
		}
		spec := info.Name + "/" + info.Models[0]
		if info.Name == faux.Name {
			if fallback == "" {
				fallback = spec
			}
			continue
		}
		if info.Source == provider.SourceFile && (m.keys == nil || m.keys.envKeys()[info.Name] == "") {
			continue
		}
		return spec
	}
	return fallback
}

// explainModel adds to a refused model what a person can do about it.
func explainModel(err error) error {
	var nc *provider.NotConfiguredError
	var um *provider.UnknownModelError
	switch {
	case errors.As(err, &nc):
		return &explained{msg: notConfigured(nc.Provider, nc.Env), err: err}
	case errors.As(err, &um):
		return fmt.Errorf("%w (`agentd models` lists its models)", err)
	}
	return err
}

// explained is an error with a message that says more than its cause's.
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }

// notConfigured says that a provider has no key, and how to give it one.
func notConfigured(name, env string) string {
	if env == "" {
		return name + " is not configured"
	}
	msg := fmt.Sprintf("%s is not configured: the host has no %s key; store one with `agentd auth set %s` (the running host uses it at once), or set %s and restart the host (`agentd shutdown`)", name, name, name, env)
	if name == openai.Name {
		msg += "; for a compatible local server, set " + openai.BaseURLEnv + " instead"
	}
	return msg
}
