package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/internal/agentdtest"
	"github.com/agentd-dev/agentd/protocol"
)

// stormConnections connects to endpoint and closes each connection at
// once, from one goroutine, as fast as it can, until the test's cleanup
// stops it; it returns how many connections were made or refused.
func stormConnections(t *testing.T, endpoint string) *atomic.Int64 {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg    sync.WaitGroup
		count atomic.Int64
	)
	for range 1 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if c, err := net.Dial("unix", endpoint); err == nil {
					c.Close()
				}
				count.Add(1)
			}
		})
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return &count
}

func TestStatusSucceedsThroughAConnectionStormWithoutASecondHost(t *testing.T) {
	p := newPlace(t)
	first := p.statusJSON()
	reg := p.registration()
	storm := stormConnections(t, reg.Endpoint)
	for i := range 3 {
		if _, errOut, code := p.run("status"); code != 0 {
			t.Fatalf("status %d during the storm: exit %d: %s", i, code, errOut)
		}
	}
	if now := p.registration(); now.PID != first.PID || now.HostEpoch != first.HostEpoch {
		t.Fatalf("the host changed during the storm: pid %d epoch %s, then pid %d epoch %s", first.PID, first.HostEpoch, now.PID, now.HostEpoch)
	}
	t.Logf("%d connections in the storm", storm.Load())
}

func TestOpenWaitsForAHostTooBusyToAcceptWithoutStartingAnother(t *testing.T) {
	p := newPlace(t)
	st := p.statusJSON()
	endpoint := p.registration().Endpoint
	// A stopped host accepts nothing: connections fill its queue until a
	// connect fails at once with EAGAIN, as under a storm.
	if err := syscall.Kill(st.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(st.PID, syscall.SIGCONT) })
	for {
		c, err := net.Dial("unix", endpoint)
		if errors.Is(err, syscall.EAGAIN) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	opts := activation.OpenOptions{Activation: activation.Options{
		Home: p.home, RuntimeDir: p.rundir,
		Command: []string{os.Args[0], "host"}, Env: []string{envAsCLI + "=1"},
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, _, _, err := activation.Open(ctx, opts)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "too busy") {
		t.Fatalf("Open on a host too busy to accept: %v; want it to wait until its deadline", err)
	}

	syscall.Kill(st.PID, syscall.SIGCONT)
	c, info, started, err := activation.Open(agentdtest.Context(t), opts)
	if err != nil {
		t.Fatalf("Open once the host accepts again: %v", err)
	}
	defer c.Close()
	if started || info.PID != st.PID {
		t.Errorf("Open reached pid %d (started %v); want the first host, pid %d", info.PID, started, st.PID)
	}
}

// registration reads the registration of the place's host.
func (p *place) registration() protocol.Registration {
	p.t.Helper()
	id := p.hostID
	if id == "" {
		id, _ = protocol.DefaultHostID(p.home)
	}
	b, err := os.ReadFile(protocol.RegistrationPath(p.rundir, id))
	if err != nil {
		p.t.Fatal(err)
	}
	var reg protocol.Registration
	if err := json.Unmarshal(b, &reg); err != nil {
		p.t.Fatal(err)
	}
	return reg
}

func TestHostRefusedTheHomeLeavesTheHoldersLogBe(t *testing.T) {
	p := newPlace(t)
	st := p.statusJSON()
	logPath := filepath.Join(p.home, activation.LogFileName)
	if st.LogFile != logPath {
		t.Fatalf("the host logs to %q; want %q", st.LogFile, logPath)
	}
	// A log past the size at which a starting host rotates it.
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write(bytes.Repeat([]byte("padding\n"), 1<<20+1))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}

	other := filepath.Join(p.home, "other.log")
	for _, log := range []string{logPath, other} {
		_, errOut, code := p.run("host", "--log-file", log)
		if code != 1 || !strings.Contains(errOut, fmt.Sprintf("held by agentd host pid %d", st.PID)) {
			t.Fatalf("second host logging to %s: exit %d: %s", log, code, errOut)
		}
	}
	after, err := os.Stat(logPath)
	if err != nil || !os.SameFile(before, after) {
		t.Errorf("the holder's log was replaced: %v", err)
	}
	for _, path := range []string{logPath + ".1", other} {
		if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the refused host made %s: %v", filepath.Base(path), err)
		}
	}
}
