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
func oneProcessor() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}
