// Package sessiontest_test tests the client's session streams against a
// real agentd: a host started on demand and its workers, all this test
// binary acting as the agentd command. They live apart from the client's
// own tests so that binary stays small and quick to start: its activation
// tests time a fake host's start.
package sessiontest_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd-dev/agentd/internal/cli"
)

// envAsCLI makes the test binary behave as the agentd command.
const envAsCLI = "AGENTD_TEST_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(envAsCLI) == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}
