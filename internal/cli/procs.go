package cli

import (
	"os"
	"runtime"
)

// oneProcessor runs the process's Go code on one processor at a time,
// unless GOMAXPROCS says otherwise. A host and a worker wait on sockets,
// PTYs and models far more than they compute; their work is a chain of
// hand-overs between goroutines (a PTY's reader, a subscription's pump,
// a connection's writer). With a processor to spare, each hand-over
// wakes a thread to take it, and that thread soon sleeps again: where a
// context switch is dear (a paravirtualised guest), those wake-ups were
// a third of a PTY relay's CPU. On one processor the goroutine readied
// runs when the one running blocks. Their parallelism is across
// processes: a worker per session.
//
// Measured again against the Go default (two processors on the 2-core
// machines agentd is benchmarked on), three alternating rounds of each,
// medians (docs/bench-sessions.md): one processor streamed 768k text
// deltas/s to a client against 404k/s, kept the worker-to-client p99 at
// 0.9 ms against 2.5 ms and the keystroke echo p99 at 2.6× tmux against
// 5.2×, and put host.status p50 at 1.24× the JSON echo server against
// 1.30×; the PTY relay was within the noise (1.44× tmux against 1.78×).
// Client commands keep the default: agentd attach builds a table on a
// goroutine of its own beside its screen's (tui.Run). agentd shell and
// agentd pty take one processor too once their view is set up (viewPTY):
// a key and its echo are hand-overs as well.
func oneProcessor() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}
