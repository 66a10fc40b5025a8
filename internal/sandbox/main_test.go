package sandbox_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"golang.org/x/sys/unix"
)

// envUndumpable makes the test binary a process that marks itself
// undumpable, as agentd's host and workers do, and waits for its stdin to
// close.
const envUndumpable = "AGENTD_SANDBOX_TEST_UNDUMPABLE"

func TestMain(m *testing.M) {
	if os.Getenv(envUndumpable) == "1" {
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			os.Exit(1)
		}
		os.Stdout.WriteString("ready\n")
		var b [1]byte
		os.Stdin.Read(b[:])
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
