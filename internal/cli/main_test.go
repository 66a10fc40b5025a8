package cli_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd-dev/agentd/internal/cli"
)

// envAsCLI makes the test binary behave as the agentd command, so tests run
// real agentd processes (clients and the hosts they start) without a build.
const envAsCLI = "AGENTD_TEST_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(envSandboxProbe) == "1" {
		os.Exit(sandboxProbe(os.Args[1:]))
	}
	if os.Getenv(envProbe) == "1" {
		os.Exit(probeWithoutCaps(os.Args[1:]))
	}
	if os.Getenv(envMCPServer) == "1" {
		os.Exit(serveMCP())
	}
	if os.Getenv(envAsCLI) == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(closingBrowser{m})
}

// closingBrowser runs the tests, then ends the browser the page's tests
// started, before the leak check.
type closingBrowser struct{ *testing.M }

func (m closingBrowser) Run() int {
	defer closeBrowser()
	return m.M.Run()
}
