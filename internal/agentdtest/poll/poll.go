// Package poll holds the one way agentd's tests wait for a condition that no
// event announces. It imports nothing of agentd, so the tests inside any
// package, the server's own included, may use it.
package poll

import (
	"testing"
	"time"
)

// Timeout is the generous deadline tests give any single event: long enough
// for a loaded machine under the race detector, short enough that a
// regression fails instead of hanging until go test's timeout.
const Timeout = 30 * time.Second

// Until returns once cond holds and fails the test, naming what it waited
// for, when cond has not held within Timeout. cond is checked every few
// milliseconds; wait on a channel instead when an event exists.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", Timeout, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
