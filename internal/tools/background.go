package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/protocol"
)

// Background runs the commands the agent starts to outlive its turn (a
// dev server, a test watcher): the session's runtime resources, which
// every client sees (`agentd ps`) and a person can take over. The worker
// provides it.
type Background interface {
	// Start starts command, on a PTY when pty, and returns it.
	Start(command string, pty bool) (protocol.Resource, error)
	// Run starts command as a shell run the turn waits for, passing its
	// output to output as it comes, one call at a time. exited closes
	// once it has exited and its output has been passed.
	Run(command string, output func([]byte)) (r protocol.Resource, exited <-chan struct{}, err error)
	// Read returns a run's state and what it shows: the latest output a
	// shell run kept (with how many earlier bytes are only in its log),
	// or a PTY's screen as text.
	Read(ref string) (BackgroundRun, error)
	// Stop ends a run and returns it once it has exited.
	Stop(ref string) (protocol.Resource, error)
}

// BackgroundRun is what Background.Read returns.
type BackgroundRun struct {
	protocol.Resource
	Output string
	// Dropped counts the earlier output no longer kept in memory.
	Dropped int64
	// Log is the file that holds all of a shell run's output.
	Log string
}

// describeRun says what a run is and how it stands.
func describeRun(r protocol.Resource) string {
	state := "running"
	if r.State == protocol.ResourceExited {
		state = "exited"
		if r.ExitCode != nil {
			state = fmt.Sprintf("exited with code %d", *r.ExitCode)
		}
	}
	return fmt.Sprintf("%s (%s, `%s`) %s", r.Ref, r.Kind, r.Command, state)
}

type bashOutputArgs struct {
	Ref string `json:"ref"`
}

var bashOutputSchema = sync.OnceValue(func() *schema {
	return object(props{
		"ref": nonEmpty("The run's ref, as bash with background true returned it (shell-N or pty-N)."),
	}, "ref")
})

var bashOutputSpec = makeSpec("bash_output", bashOutputSchema, func() string {
	return "Read a background run's state and output: for a shell run its latest output (up to 64 KiB; " +
		"all of it is in its log file), for a PTY its screen as it is now. Use it to see whether a dev " +
		"server came up or what a watcher printed."
})

type bashOutputTool struct{}

func (bashOutputTool) Spec() llm.ToolSpec { return bashOutputSpec() }

// ReadOnly is true: reading a run changes nothing.
func (bashOutputTool) ReadOnly() bool { return true }

func (bashOutputTool) Run(_ context.Context, env *Env, raw json.RawMessage) Result {
	var a bashOutputArgs
	if bad, ok := decode("bash_output", bashOutputSchema(), raw, &a); !ok {
		return bad
	}
	if env.Background == nil {
		return failf("bash_output", "this session has no background runs")
	}
	run, err := env.Background.Read(a.Ref)
	if err != nil {
		return failf("bash_output", "%v", err)
	}
	var b strings.Builder
	b.WriteString(describeRun(run.Resource))
	b.WriteString("\n")
	if run.Dropped > 0 {
		fmt.Fprintf(&b, "… %d earlier bytes are only in %s\n", run.Dropped, run.Log)
	}
	if out := strings.TrimRight(run.Output, "\n "); out == "" {
		b.WriteString("(no output yet)\n")
	} else {
		b.WriteString(out)
		b.WriteString("\n")
	}
	return Result{Content: b.String()}
}

var bashStopSpec = makeSpec("bash_stop", bashOutputSchema, func() string {
	return "Stop a background run the session started with bash (background true), or one a person started: " +
		"its processes get SIGTERM, then SIGKILL after 2 seconds, and its final state is returned."
})

type bashStopTool struct{}

func (bashStopTool) Spec() llm.ToolSpec { return bashStopSpec() }

// ReadOnly is false: it ends processes.
func (bashStopTool) ReadOnly() bool { return false }

func (bashStopTool) Run(_ context.Context, env *Env, raw json.RawMessage) Result {
	var a bashOutputArgs
	if bad, ok := decode("bash_stop", bashOutputSchema(), raw, &a); !ok {
		return bad
	}
	if env.Background == nil {
		return failf("bash_stop", "this session has no background runs")
	}
	r, err := env.Background.Stop(a.Ref)
	if err != nil {
		return failf("bash_stop", "%v", err)
	}
	return Result{Content: "stopped " + describeRun(r) + "\n"}
}

// startBackground starts a bash call with background true.
func startBackground(env *Env, command string, pty bool) Result {
	if env.Background == nil {
		return failf("bash", "this session cannot run commands in the background")
	}
	r, err := env.Background.Start(command, pty)
	if err != nil {
		return failf("bash", "cannot start %q in the background: %v", command, err)
	}
	return Result{Content: fmt.Sprintf("started %s in the background; it outlives this turn. "+
		"Read it with bash_output {\"ref\":%q}, stop it with bash_stop {\"ref\":%q}.\n", describeRun(r), r.Ref, r.Ref)}
}
