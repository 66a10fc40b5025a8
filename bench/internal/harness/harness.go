// Package harness runs a bench program's body: it stops the processes the
// bench started when the body ends or the program is interrupted, and
// turns the outcome into an exit code.
package harness

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Run runs body, then cleanup, and exits: 1 when body failed. An interrupt
// (SIGINT or SIGTERM) runs cleanup and exits 130.
func Run(name string, body func(context.Context) error, cleanup func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		fmt.Fprintf(os.Stderr, "%s: interrupted; stopping the processes it started\n", name)
		cleanup()
		os.Exit(130)
	}()
	err := body(context.Background())
	cleanup()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
	os.Exit(0)
}
