package cli

import (
	"os"

	"github.com/agentd-dev/agentd/internal/provider"
	"github.com/agentd-dev/agentd/internal/provider/anthropic"
	"github.com/agentd-dev/agentd/internal/provider/faux"
	"github.com/agentd-dev/agentd/internal/provider/openai"
	"github.com/agentd-dev/agentd/protocol"
)

// EnvFauxScript scripts the built-in offline model from a file.
const EnvFauxScript = "AGENTD_FAUX_SCRIPT"

// providers registers the model providers, explicitly, configured from
// the environment.
func providers() (*provider.Registry, error) {
	reg := provider.NewRegistry()
	f, err := faux.New(faux.Config{ScriptPath: os.Getenv(EnvFauxScript)})
	if err != nil {
		return nil, err
	}
	reg.Register(f)
	retry := provider.DefaultRetryPolicy()
	reg.Register(provider.WithRetry(anthropic.New(anthropic.Config{
		APIKey: os.Getenv("ANTHROPIC_API_KEY"), BaseURL: os.Getenv("ANTHROPIC_BASE_URL"),
	}), retry))
	reg.Register(provider.WithRetry(openai.New(openai.Config{
		APIKey: os.Getenv("OPENAI_API_KEY"), BaseURL: os.Getenv("OPENAI_BASE_URL"),
	}), retry))
	return reg, nil
}

// models adapts the registry to what the host's session service asks.
type models struct {
	reg *provider.Registry
	def string // the host's default model; the registry's when empty
}

func (m models) Available() []protocol.Model {
	var out []protocol.Model
	for _, info := range m.reg.Available() {
		if !info.Configured {
			continue
		}
		for _, id := range info.Models {
			out = append(out, protocol.Model{Provider: info.Name, ModelID: id})
		}
	}
	return out
}

func (m models) Check(spec string) error {
	_, _, err := m.reg.Lookup(spec)
	return err
}

func (m models) Ready(spec string) error {
	_, _, err := m.reg.Resolve(spec)
	return err
}

func (m models) Default() string {
	if m.def != "" {
		return m.def
	}
	return m.reg.Default()
}
