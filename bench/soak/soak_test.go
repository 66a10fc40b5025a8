package main

import (
	"strings"
	"testing"
	"time"
)

// TestSoak runs a short soak: sessions run turns while workers and the
// host are killed at random moments, and no transcript loses or repeats
// a record, every turn ends once, and the next turn after each fault
// completes.
func TestSoak(t *testing.T) {
	seed := time.Now().UnixNano()
	var out strings.Builder
	s, err := New(Config{
		Duration: 15 * time.Second, MinFaults: 4, Sessions: 3, Seed: seed,
		Lines: 40, MaxGap: time.Second, Handoff: true, Out: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	err = s.Run(t.Context())
	t.Log(out.String())
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	rep := s.Report()
	if rep.Lost != 0 || rep.Duplicated != 0 || len(rep.Failures) != 0 {
		t.Fatalf("seed %d: %d lost, %d duplicated, failed checks: %q", seed, rep.Lost, rep.Duplicated, rep.Failures)
	}
	if rep.Faults < 4 || rep.FaultKinds["kill-worker"] == 0 || rep.FaultKinds["kill-host"] == 0 {
		t.Fatalf("seed %d: faults injected: %v", seed, rep.FaultKinds)
	}
	if rep.Checks < rep.Faults+1 || rep.Turns == 0 || rep.Completed == 0 {
		t.Fatalf("seed %d: %d checks, %d turns, %d completed", seed, rep.Checks, rep.Turns, rep.Completed)
	}
}
