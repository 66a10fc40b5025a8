package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd-dev/agentd/internal/cli"
)

func TestMain(m *testing.M) {
	if os.Getenv(envAsAgentd) == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}
