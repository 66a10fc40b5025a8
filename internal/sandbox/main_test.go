package sandbox_test

import (
	"io"
	"net"
	"os"
	"testing"

	"go.uber.org/goleak"

	"golang.org/x/sys/unix"
)

// envUndumpable makes the test binary a process that marks itself
// undumpable, as agentd's host and workers do, and waits for its stdin to
// close.
const envUndumpable = "AGENTD_SANDBOX_TEST_UNDUMPABLE"

// envUnixClient makes the test binary a client of the unix socket it
// names: it prints what it reads there.
const envUnixClient = "AGENTD_SANDBOX_TEST_UNIX_CLIENT"

func TestMain(m *testing.M) {
	if path := os.Getenv(envUnixClient); path != "" {
		c, err := net.Dial("unix", path)
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		io.Copy(os.Stdout, c)
		os.Exit(0)
	}
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
