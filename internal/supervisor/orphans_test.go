package supervisor

import (
	"bufio"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestSessionOfReadsTheKernelsAnswer(t *testing.T) {
	sid, err := unix.Getsid(0)
	if err != nil {
		t.Fatal(err)
	}
	if got := sessionOf(os.Getpid()); got != sid {
		t.Fatalf("sessionOf(self) = %d, want %d", got, sid)
	}
	if got := sessionOf(-5); got != -1 {
		t.Fatalf("sessionOf(no such process) = %d", got)
	}
}

// TestKillSessionEndsWhatItsLeaderLeft: the members of a session are
// killed; its leader (a worker, dead by then) is not looked for.
func TestKillSessionEndsWhatItsLeaderLeft(t *testing.T) {
	leader := exec.Command("sh", "-c", "sleep 100 & echo started; wait")
	leader.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := leader.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if n := killSession(leader.Process.Pid); n != 1 {
		leader.Process.Kill()
		t.Fatalf("killSession signalled %d processes, want the one sleep", n)
	}
	// With its child gone, the shell's wait returns and it exits: the
	// leader itself was not killed.
	if err := leader.Wait(); err != nil {
		t.Fatalf("the session's leader: %v", err)
	}
}
