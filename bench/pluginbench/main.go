// Command pluginbench measures what a session's plugin packages add to
// the start of its worker: session.commands through the host to a session
// whose worker is stopped (the host starts one, which loads the packages
// and answers), for a session of three packages (each of 20 commands and 5
// skills) beside the same call for a session of none, interleaved in
// rounds, as p50 and p90. Goal: at most 1.2× at p50. For information, the
// three packages loaded in this process, as a worker loads them.
//
// Everything runs as real processes: this binary runs agentd's command
// line when asked to (the host and its workers), in a fresh temporary
// home, with the offline model.
//
// Run it from the module root:
//
//	go run ./bench/pluginbench
//	go run ./bench/pluginbench -rounds 50
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentd-dev/agentd/bench/internal/asagentd"
	"github.com/agentd-dev/agentd/bench/internal/harness"
	"github.com/agentd-dev/agentd/bench/internal/table"
	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/internal/plugin"
	"github.com/agentd-dev/agentd/protocol"
)

type row table.Row

// commands and skills are what each package holds.
var commands, skills int

// goal is the most a session's three packages may make its worker's
// start take, as a ratio to a session of none, at p50.
const goal = 1.2

func main() {
	asagentd.Main()
	rounds := flag.Int("rounds", 30, "worker starts of each session, interleaved")
	flag.IntVar(&commands, "commands", 20, "commands of each package")
	flag.IntVar(&skills, "skills", 5, "skills of each package")
	flag.Parse()
	base, err := os.MkdirTemp("", "plugb")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	self, asAgentd, err := asagentd.Command()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	home, runDir, work := filepath.Join(base, "h"), filepath.Join(base, "r"), filepath.Join(base, "w")
	env := []string{asAgentd, "ANTHROPIC_API_KEY=", "OPENAI_API_KEY=", protocol.EnvHome + "=" + home, protocol.EnvRuntimeDir + "=" + runDir}
	harness.Run("pluginbench", func(ctx context.Context) error {
		for _, d := range []string{home, runDir, work} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return err
			}
		}
		kits, err := writeKits(base, 3)
		if err != nil {
			return err
		}
		act := activation.Options{Home: home, RuntimeDir: runDir, Command: append(slices.Clone(self), "host"), IdleGrace: time.Hour, Env: env}
		c, _, _, err := activation.Open(ctx, activation.OpenOptions{Activation: act, Options: client.Options{Surface: protocol.SurfaceSDK}})
		if err != nil {
			return err
		}
		defer c.Close()
		rows, err := bench(ctx, c, work, kits, *rounds)
		if err != nil {
			return err
		}
		table.Print(os.Stdout, rows, 2)
		return nil
	}, func() {
		cmd := exec.Command(self[0], "shutdown", "--force")
		cmd.Env = append(os.Environ(), env...)
		cmd.Run()
		os.RemoveAll(base)
	})
}

// writeKits writes n plugin packages of 20 commands and 5 skills each.
func writeKits(base string, n int) ([]string, error) {
	var dirs []string
	for k := range n {
		dir := filepath.Join(base, fmt.Sprintf("kit%d", k))
		files := map[string]string{".claude-plugin/plugin.json": fmt.Sprintf(`{"name":"kit%d","version":"1.0.0","description":"A kit"}`, k)}
		for i := range commands {
			files[fmt.Sprintf("commands/c%d.md", i)] = "---\ndescription: A command\nargument-hint: <file>\n---\nLook at $1 and say what $ARGUMENTS means.\n"
		}
		for i := range skills {
			files[fmt.Sprintf("skills/s%d/SKILL.md", i)] = fmt.Sprintf("---\nname: s%d\ndescription: A skill\n---\n# Skill\n\nDo it well.\n", i)
		}
		for rel, content := range files {
			path := filepath.Join(dir, rel)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return nil, err
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				return nil, err
			}
		}
		dirs = append(dirs, dir)
	}
	return dirs, nil
}

func bench(ctx context.Context, c *client.Conn, work string, kits []string, rounds int) ([]row, error) {
	var ids []string
	for _, plugins := range [][]string{nil, kits} {
		s, err := client.Call(ctx, c, protocol.OpSessionCreate, protocol.SessionCreateInput{Cwd: work, Plugins: plugins})
		if err != nil {
			return nil, err
		}
		ids = append(ids, s.SessionID)
	}
	times := make([][]time.Duration, len(ids))
	for i := range rounds + 3 {
		for k, id := range ids {
			// Archiving stops the session's worker; the next call starts one.
			if _, err := client.Call(ctx, c, protocol.OpSessionArchive, protocol.SessionRef{SessionID: id}); err != nil {
				return nil, err
			}
			if _, err := client.Call(ctx, c, protocol.OpSessionUnarchive, protocol.SessionRef{SessionID: id}); err != nil {
				return nil, err
			}
			t0 := time.Now()
			res, err := client.Call(ctx, c, protocol.OpSessionCommands, protocol.SessionRef{SessionID: id})
			d := time.Since(t0)
			if err != nil {
				return nil, err
			}
			if want := commands * len(kits) * k; len(res.Commands) != want {
				return nil, fmt.Errorf("session %s has %d commands, want %d", id, len(res.Commands), want)
			}
			if i >= 3 { // the first rounds warm the caches
				times[k] = append(times[k], d)
			}
		}
	}
	none50, none90 := percentiles(times[0])
	with50, with90 := percentiles(times[1])
	var loads []time.Duration
	for range rounds {
		t0 := time.Now()
		if _, err := plugin.LoadAll("plugins", kits); err != nil {
			return nil, err
		}
		loads = append(loads, time.Since(t0))
	}
	load50, _ := percentiles(loads)
	return []row{
		{"worker start to session.commands p50, 3 packages", with50.String(), none50.String() + " no packages", table.Ratio(with50, none50), fmt.Sprintf("≤ %.1f×", goal), table.Verdict(table.Ratio(with50, none50) <= goal)},
		{"worker start to session.commands p90, 3 packages", with90.String(), none90.String() + " no packages", table.Ratio(with90, none90), "info", "-"},
		{fmt.Sprintf("3 packages (%d commands, %d skills) loaded, p50", 3*commands, 3*skills), load50.String(), none50.String() + " worker start", table.Ratio(load50, none50), "info", "-"},
	}, nil
}

func percentiles(d []time.Duration) (p50, p90 time.Duration) {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)*9/10]
}
