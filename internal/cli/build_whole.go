//go:build !agentd_client

package cli

import "os"

// hostExecutable is the executable the hosts a command starts run: this
// one.
func hostExecutable() (string, error) { return os.Executable() }
