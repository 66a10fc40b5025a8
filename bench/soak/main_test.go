package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd-dev/agentd/bench/internal/asagentd"
)

func TestMain(m *testing.M) {
	asagentd.Main()
	goleak.VerifyTestMain(m)
}
