package sessions

import (
	"errors"

	"github.com/agentd-dev/agentd/protocol"
)

// EchoModels offers the offline model alone, faux/echo, to the package's
// external tests.
type EchoModels struct{}

func (EchoModels) Available() []protocol.Model {
	return []protocol.Model{{Provider: "faux", ModelID: "echo"}}
}
func (EchoModels) Default() string { return "faux/echo" }
func (EchoModels) Providers() []protocol.ProviderStatus {
	return []protocol.ProviderStatus{{Name: "faux", Configured: true}}
}
func (m EchoModels) Ready(spec string) error { return m.Check(spec) }
func (EchoModels) Check(spec string) error {
	if spec != "faux/echo" {
		return errors.New("unknown model " + spec)
	}
	return nil
}
