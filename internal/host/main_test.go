package host_test

import (
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// envDial makes the test binary a client that dials the socket it names,
// sends a hello and prints what came back: for tests that need a peer of
// another uid.
const envDial = "AGENTD_TEST_DIAL"

func TestMain(m *testing.M) {
	if endpoint := os.Getenv(envDial); endpoint != "" {
		os.Exit(dialAndReport(endpoint))
	}
	goleak.VerifyTestMain(m)
}

func dialAndReport(endpoint string) int {
	c, err := net.Dial("unix", endpoint)
	if err != nil {
		fmt.Printf("dial failed: %v\n", err)
		return 1
	}
	defer c.Close()
	fmt.Fprintf(c, `{"kind":"hello","clientInstanceId":"intruder","protocolMin":1,"protocolMax":1,"compatibilityEpoch":1,"compositionId":"agentd.interactive"}`+"\n")
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	fmt.Printf("read %q err=%v\n", buf[:n], err)
	return 0
}
