package server

import "testing"

// The drain's wait is an event: the channel of none closes as the last
// operation in flight finishes, and is closed at once when none is.
func TestTheOperationCounterSaysWhenTheLastOperationEnds(t *testing.T) {
	var ops opCounter
	wait(t, ops.none(), "none in flight before any began")
	ops.add()
	ops.add()
	none := ops.none()
	ops.done()
	select {
	case <-none:
		t.Fatal("none closed with an operation still in flight")
	default:
	}
	if again := ops.none(); again != none {
		t.Fatal("a second waiter was given another channel")
	}
	ops.done()
	wait(t, none, "the last operation's end")
	if n := ops.load(); n != 0 {
		t.Fatalf("%d in flight, want 0", n)
	}
}
