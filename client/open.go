package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentd-dev/agentd/protocol"
)

// DefaultIdleGrace is how long a host started by cold activation stays with
// nothing to do before it retires, unless AGENTD_IDLE_GRACE says otherwise.
const DefaultIdleGrace = 5 * time.Minute

// EnvIdleGrace sets the idle grace of hosts started by cold activation, in
// Go duration syntax.
const EnvIdleGrace = "AGENTD_IDLE_GRACE"

// OpenOptions say which host to open and whether to start one.
type OpenOptions struct {
	// Activation places the host; empty fields take the defaults of
	// protocol.DefaultHome, DefaultRuntimeDir and DefaultHostID.
	Activation ActivationOptions
	// NoStart fails with ErrNoHost instead of starting a host.
	NoStart bool
	// HostArgs are extra arguments for a host this call starts, such as
	// its default model. They apply only to a new host: when one already
	// runs, Open fails with ErrHostRunning rather than ignore them.
	HostArgs []string
	Options
}

// ErrHostRunning is returned by Open when HostArgs were given but a host
// was already running.
var ErrHostRunning = errors.New("host options are only valid when this command starts a new host, and one is already running")

// ErrNoHost is returned by Open with NoStart when no host is running.
var ErrNoHost = errors.New("no agentd host is running")

// ResolveActivation fills the empty placement fields of opts (Home,
// RuntimeDir, HostID) from the environment.
func ResolveActivation(opts ActivationOptions) (ActivationOptions, error) {
	return opts.withDefaults()
}

// LogFileName is the file in the home where a host started by Open logs.
const LogFileName = "host.log"

// IdleGraceFromEnv returns the idle grace for a host started by cold
// activation: AGENTD_IDLE_GRACE, else DefaultIdleGrace.
func IdleGraceFromEnv() (time.Duration, error) {
	v := os.Getenv(EnvIdleGrace)
	if v == "" {
		return DefaultIdleGrace, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive Go duration such as 30s or 5m", EnvIdleGrace, v)
	}
	return d, nil
}

// Open connects to the host of a home, starting it first when none runs
// (cold activation) unless NoStart. When the host it found turns out
// incompatible, it looks again once — the host may just have been
// replaced — before failing. A host that serves its maximum of
// connections is dialled again until one is free or ctx ends, and then
// Open returns its *RefusedError. started reports whether this call
// started the host.
func Open(ctx context.Context, opts OpenOptions) (c *Conn, info HostInfo, started bool, err error) {
	act, err := ResolveActivation(opts.Activation)
	if err != nil {
		return nil, HostInfo{}, false, err
	}
	if act.IdleGrace == 0 {
		if act.IdleGrace, err = IdleGraceFromEnv(); err != nil {
			return nil, HostInfo{}, false, err
		}
	}
	if len(opts.Activation.Command) == 0 {
		act.Command = append(act.Command, "--log-file", filepath.Join(act.Home, LogFileName))
	}
	act.Command = append(act.Command, opts.HostArgs...)
	for attempt := 0; ; attempt++ {
		c, err = nil, nil
		if attempt == 0 && len(opts.HostArgs) == 0 && !act.Replace {
			c, info, err = dialRegistered(ctx, act, opts.Options)
		}
		if c == nil && err == nil {
			info, started, err = locate(ctx, act, opts.NoStart)
			if err != nil {
				return nil, HostInfo{}, false, err
			}
			if len(opts.HostArgs) > 0 && !started {
				return nil, info, false, ErrHostRunning
			}
			c, err = dialServed(ctx, info.Endpoint, opts.Options)
		}
		var inc *IncompatibleError
		if errors.As(err, &inc) && attempt == 0 {
			continue
		}
		if err != nil {
			return nil, HostInfo{}, false, err
		}
		return c, info, started, nil
	}
}

// dialRegistered dials the host registered for act when its record says
// ready and its process exists, without the liveness probe of discovery:
// the handshake proves the host alive. It returns no connection and no
// error when there is no such record or nothing answers at its endpoint;
// discovery, which cleans up after dead hosts, decides then. A host that
// refused the connection, and a Dial that lasted until ctx ended (a host
// too busy to take the connection), are returned as they failed.
func dialRegistered(ctx context.Context, act ActivationOptions, opts Options) (*Conn, HostInfo, error) {
	info, _, h := readRegistration(act.RuntimeDir, act.HostID)
	if h != hostLive || info.State != protocol.StateReady {
		return nil, HostInfo{}, nil
	}
	c, err := dialServed(ctx, info.Endpoint, opts)
	var (
		inc *IncompatibleError
		ref *RefusedError
	)
	if err != nil && !errors.As(err, &inc) && !errors.As(err, &ref) && ctx.Err() == nil {
		return nil, HostInfo{}, nil
	}
	return c, info, err
}

// dialServed dials endpoint as Dial does, and when the host refuses the
// connection because it serves its maximum of connections, dials again,
// waiting longer each time, until a slot is free or ctx ends: then it
// returns the refusal.
func dialServed(ctx context.Context, endpoint string, opts Options) (*Conn, error) {
	again := dialRetryMin
	for {
		c, err := Dial(ctx, endpoint, opts)
		var ref *RefusedError
		if !errors.As(err, &ref) {
			return c, err
		}
		if _, werr := sleep(ctx, again); werr != nil {
			return nil, err
		}
		again = min(2*again, dialRetryMax)
	}
}

func locate(ctx context.Context, act ActivationOptions, noStart bool) (HostInfo, bool, error) {
	if !noStart {
		return EnsureHost(ctx, act)
	}
	hosts, err := Discover(ctx, act.RuntimeDir)
	if err != nil {
		return HostInfo{}, false, err
	}
	for _, h := range hosts {
		if h.HostID == act.HostID {
			return h, false, nil
		}
	}
	return HostInfo{}, false, ErrNoHost
}

// WaitExited waits until the host of info has stopped: its registration is
// gone or names another process, and its process has exited.
func WaitExited(ctx context.Context, info HostInfo) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if !processAlive(info.PID) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("host %s (pid %d) did not exit: %w", info.HostID, info.PID, ctx.Err())
		case <-tick.C:
		}
	}
}

// processAlive reports whether pid runs and is not a zombie waiting to be
// reaped.
func processAlive(pid int) bool {
	if !processExists(pid) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}
