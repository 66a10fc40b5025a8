// Command agentd is the durable local host for coding-agent sessions: its
// host daemon and every client command.
package main

import (
	"os"

	"github.com/agentd-dev/agentd/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
