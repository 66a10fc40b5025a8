package host_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentd-dev/agentd/internal/agentdtest"
)

const capDACOverride = 1 // CAP_DAC_OVERRIDE

func TestConnectionFromAnotherUIDIsRefusedBeforeHandshakeAndLogged(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a peer as another uid")
	}
	h := agentdtest.NewHost(t, agentdtest.Options{})
	observer := h.Connect(t)
	// The peer runs as nobody but keeps CAP_DAC_OVERRIDE, so the 0700
	// directory and 0600 socket let it connect: only the host's peer
	// credential check stands in its way.
	cmd := exec.Command(copyExecutable(t), "-test.run=^$")
	cmd.Env = append(os.Environ(), "AGENTD_TEST_DIAL="+h.Endpoint(), "GORACE=atexit_sleep_ms=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential:  &syscall.Credential{Uid: 65534, Gid: 65534},
		AmbientCaps: []uintptr{capDACOverride},
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("peer: %v: %s", err, out)
	}
	if !strings.Contains(string(out), `read ""`) || strings.Contains(string(out), "accepted") {
		t.Fatalf("peer of uid 65534 got: %s", out)
	}
	diagnosticsMention(t, observer, "refused a connection from uid 65534")
}

// copyExecutable copies the test binary where any uid may run it.
func copyExecutable(t *testing.T) string {
	dir := agentdtest.ShortDir(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	path := filepath.Join(dir, "peer")
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
