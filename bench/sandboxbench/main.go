// Command sandboxbench measures what the sandbox adds to a bash call of
// the agent: the call `true` in a workspace session (and in one with the
// network off) beside the same call unsandboxed, interleaved in one run,
// as p50 and p90; and, for information, a session's first call, which
// builds the ruleset and has no spare re-exec started ahead. The sandbox's re-exec is the agentd binary as it is
// installed (CGO_ENABLED=0), built first unless -agentd names one.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentd-dev/agentd/bench/internal/table"
	"github.com/agentd-dev/agentd/internal/sandbox"
	"github.com/agentd-dev/agentd/internal/tools"
	"github.com/agentd-dev/agentd/protocol"
)

// goal is the most a sandboxed call may add at p50.
const goal = 2 * time.Millisecond

type row table.Row

func main() {
	rounds := flag.Int("rounds", 300, "calls of each kind, interleaved")
	agentd := flag.String("agentd", "", "a prebuilt agentd (default: build ./cmd/agentd with CGO_ENABLED=0)")
	flag.Parse()
	if err := run(*rounds, *agentd); err != nil {
		fmt.Fprintf(os.Stderr, "sandboxbench: %v\n", err)
		os.Exit(1)
	}
}

func run(rounds int, agentd string) error {
	base, err := os.MkdirTemp("", "sandboxbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	if agentd == "" {
		agentd = filepath.Join(base, "agentd")
		cmd := exec.Command("go", "build", "-o", agentd, "github.com/agentd-dev/agentd/cmd/agentd")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building agentd (run from inside the module, or pass -agentd): %v\n%s", err, out)
		}
	}
	dirs := map[string]string{}
	for _, d := range []string{"work", "tmp", "home", "run"} {
		dirs[d] = filepath.Join(base, d)
		if err := os.Mkdir(dirs[d], 0o700); err != nil {
			return err
		}
	}
	pol := sandbox.Policy{
		Mode: protocol.SandboxWorkspace, Workspace: []string{dirs["work"]}, Tmp: dirs["tmp"],
		Hidden: []string{dirs["home"], dirs["run"]}, Executable: agentd,
	}
	offline := sandbox.Policy{
		Mode: protocol.SandboxWorkspace, Workspace: []string{dirs["work"]}, Tmp: dirs["tmp"],
		Hidden: []string{dirs["home"], dirs["run"]}, Executable: agentd, NetworkOff: true,
	}
	defer pol.Close()
	defer offline.Close()
	kinds := []struct {
		name string
		pol  *sandbox.Policy
	}{{"unsandboxed", nil}, {"workspace", &pol}, {"workspace, network off", &offline}}

	bash := tools.Builtin()[0]
	if bash.Spec().Name != "bash" {
		return fmt.Errorf("the first builtin tool is %s, not bash", bash.Spec().Name)
	}
	args, _ := json.Marshal(map[string]string{"command": "true"})
	times := make([][]time.Duration, len(kinds))
	for i := range rounds + 10 {
		for k, kind := range kinds {
			env := &tools.Env{Cwd: dirs["work"], Environ: os.Environ(), Sandbox: kind.pol}
			t0 := time.Now()
			r := bash.Run(context.Background(), env, args)
			d := time.Since(t0)
			if r.IsError || r.Content != "(no output)\nexit code 0" {
				return fmt.Errorf("bash true (%s) answered %q", kind.name, r.Content)
			}
			if i >= 10 { // the first rounds warm the caches
				times[k] = append(times[k], d)
			}
		}
	}
	anchorP50, anchorP90 := percentiles(times[0])
	fmt.Printf("bash `true`, %d calls of each kind interleaved; unsandboxed p50 %s, p90 %s\n", rounds, anchorP50, anchorP90)
	var rows []row
	for k, kind := range kinds[1:] {
		p50, p90 := percentiles(times[k+1])
		fmt.Printf("%s: p50 %s (+%s), p90 %s\n", kind.name, p50, p50-anchorP50, p90)
		rows = append(rows, row{
			"bash true p50, " + kind.name, p50.String(), anchorP50.String() + " unsandboxed", table.Ratio(p50, anchorP50),
			"≤ +2ms", table.Verdict(p50-anchorP50 <= goal),
		})
	}
	// A session's first call has no spare and builds the ruleset: a new
	// Policy for each call.
	var first []time.Duration
	for range rounds / 3 {
		fresh := sandbox.Policy{
			Mode: protocol.SandboxWorkspace, Workspace: []string{dirs["work"]}, Tmp: dirs["tmp"],
			Hidden: []string{dirs["home"], dirs["run"]}, Executable: agentd,
		}
		env := &tools.Env{Cwd: dirs["work"], Environ: os.Environ(), Sandbox: &fresh}
		t0 := time.Now()
		r := bash.Run(context.Background(), env, args)
		first = append(first, time.Since(t0))
		fresh.Close()
		if r.IsError {
			return fmt.Errorf("bash true (a session's first call) answered %q", r.Content)
		}
	}
	p50, _ := percentiles(first)
	rows = append(rows, row{
		"bash true p50, a session's first call", p50.String(), anchorP50.String() + " unsandboxed", table.Ratio(p50, anchorP50), "-", "info",
	})
	table.Print(os.Stdout, rows, 2)
	return nil
}

func percentiles(d []time.Duration) (p50, p90 time.Duration) {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Microsecond), s[len(s)*9/10].Round(time.Microsecond)
}
