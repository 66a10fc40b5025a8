package startenv_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentd-dev/agentd/internal/startenv"
)

// envShow makes the test binary print TMUX and TERM as its tests start
// and after Restore, instead of testing.
const envShow = "STARTENV_TEST_SHOW"

func TestMain(m *testing.M) {
	if os.Getenv(envShow) == "1" {
		before := os.Getenv("TMUX") + "|" + os.Getenv("TERM")
		startenv.Restore()
		fmt.Printf("before %q after %q", before, os.Getenv("TMUX")+"|"+os.Getenv("TERM"))
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// TMUX and TERM are hidden while packages initialise and given back by
// Restore, as they were; a process without them gets none.
func TestTmuxAndTermAreHiddenUntilRestored(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"TMUX=/run/tmux/default,1,0", "TERM=tmux-256color"}, `before "|" after "/run/tmux/default,1,0|tmux-256color"`},
		{[]string{"TERM=xterm"}, `before "|" after "|xterm"`},
		{nil, `before "|" after "|"`},
	} {
		cmd := exec.Command(os.Args[0])
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "TMUX=") && !strings.HasPrefix(kv, "TERM=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, envShow+"=1")
		cmd.Env = append(cmd.Env, tc.env...)
		out, err := cmd.Output()
		if err != nil || string(out) != tc.want {
			t.Errorf("with %q: %q, %v; want %q", tc.env, out, err, tc.want)
		}
	}
}
