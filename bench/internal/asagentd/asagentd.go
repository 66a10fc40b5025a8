// Package asagentd lets a bench program be the agentd it runs: started
// with Env set to 1, the program runs agentd's command line instead of
// its own, so that a host it starts starts the same program as each
// worker, and nothing else is built. It is for the programs under bench/
// only.
package asagentd

import (
	"bytes"
	"fmt"
	"os"

	"github.com/agentd-dev/agentd/internal/cli"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

// Env, set to 1 in a process's environment, makes a bench program run
// agentd's command line.
const Env = "AGENTD_BENCH_AS_AGENTD"

// Main runs agentd's command line and exits when this process was started
// as agentd, and returns otherwise. A bench program calls it first in
// main, and in TestMain.
func Main() {
	if os.Getenv(Env) == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
}

// Command returns the argv that starts this program, and the environment
// entry that makes it agentd.
func Command() (argv []string, env string, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	return []string{self}, Env + "=1", nil
}

// Placed reports whether pid runs as agentd placed in runtime directory
// runDir: a process of the bench's, which its end may stop.
func Placed(pid int, runDir string) bool {
	if !proc.Running(pid) {
		return false
	}
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	return err == nil && bytes.Contains(env, []byte(protocol.EnvRuntimeDir+"="+runDir+"\x00"))
}
