//go:build agentd_client

package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// hostExecutable is the executable the hosts a command starts run: the
// whole executable beside this client build.
func hostExecutable() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	exe := filepath.Join(filepath.Dir(self), hostExecutableName)
	if _, err := os.Stat(exe); err != nil {
		return "", fmt.Errorf("this agentd is the client build, whose hosts and daemon commands run %s beside it, and %s is missing: build it with `go build -o %s ./cmd/agentd`", hostExecutableName, exe, exe)
	}
	return exe, nil
}

// The commands the client build runs through the whole executable.
var (
	newHostCmd   = wholeCommand("host", shortHost, false)
	newWorkerCmd = wholeCommand("worker", shortWorker, true)
	newMCPCmd    = wholeCommand("mcp", shortMCP, false)
	newACPCmd    = wholeCommand("acp", shortACP, false)
)

// wholeCommand is command name, run by the whole executable with this
// process's arguments, in its place.
func wholeCommand(name, short string, hidden bool) func(*env) *cobra.Command {
	return func(*env) *cobra.Command {
		return &cobra.Command{
			Use: name, Short: short, Hidden: hidden, DisableFlagParsing: true,
			RunE: func(*cobra.Command, []string) error {
				exe, err := hostExecutable()
				if err != nil {
					return err
				}
				err = syscall.Exec(exe, append([]string{exe}, os.Args[1:]...), os.Environ())
				return errors.Join(fmt.Errorf("running %s %s", exe, name), err)
			},
		}
	}
}
