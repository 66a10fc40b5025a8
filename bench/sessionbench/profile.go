package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"

	"github.com/agentd-dev/agentd/internal/cli"
)

// envProfileAgentd, set to a directory, makes this binary run agentd's
// command line instead of the bench: the same code `agentd` runs, with a
// CPU profile of each host and worker process written into the directory
// when the process ends. Hosts start their workers with their own
// executable, so a host started this way starts profiled workers.
const envProfileAgentd = "SESSIONBENCH_PROFILE_AGENTD"

func runAsAgentd(dir string, args []string) int {
	role := ""
	if len(args) > 0 && (args[0] == "host" || args[0] == "worker") {
		role = args[0]
	}
	if role == "" {
		return cli.Main(args, os.Stdin, os.Stdout, os.Stderr)
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.cpu.pprof", role, os.Getpid())))
	if err != nil {
		fmt.Fprintf(os.Stderr, "sessionbench: %v\n", err)
		return 1
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "sessionbench: %v\n", err)
		return 1
	}
	code := cli.Main(args, os.Stdin, os.Stdout, os.Stderr)
	pprof.StopCPUProfile()
	f.Close()
	// The heap as the process ends: for a worker, what it held idle.
	if h, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.heap.pprof", role, os.Getpid()))); err == nil {
		runtime.GC()
		pprof.WriteHeapProfile(h)
		h.Close()
	}
	return code
}
