package activation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

// DefaultIdleGrace is how long a host started by cold activation stays with
// nothing to do before it retires, unless AGENTD_IDLE_GRACE says otherwise.
const DefaultIdleGrace = 5 * time.Minute

// EnvIdleGrace sets the idle grace of hosts started by cold activation, in
// Go duration syntax.
const EnvIdleGrace = "AGENTD_IDLE_GRACE"

// LogFileName is the file in the home where a host started by the agentd
// command logs.
const LogFileName = "host.log"

// A host that serves its maximum of connections refuses one more; Open
// dials again after dialRetryMin, then after doubling waits up to
// dialRetryMax, until its context ends.
const (
	dialRetryMin = time.Millisecond
	dialRetryMax = 50 * time.Millisecond
)

// OpenOptions say which host to open and whether to start one.
type OpenOptions struct {
	// Activation places the host and says how to start one; empty
	// placement fields take the defaults of protocol.DefaultHome,
	// DefaultRuntimeDir and DefaultHostID. Its Command may be empty with
	// NoStart.
	Activation Options
	// NoStart fails with client.ErrNoHost instead of starting a host.
	NoStart bool
	// HostArgs are extra arguments for a host this call starts, such as
	// its default model. They apply only to a new host: when one already
	// runs, Open fails with ErrHostRunning rather than ignore them.
	HostArgs []string
	client.Options
}

// ErrHostRunning is returned by Open when HostArgs were given but a host
// was already running.
var ErrHostRunning = errors.New("host options are only valid when this command starts a new host, and one is already running")

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
// (cold activation, see EnsureHost) unless NoStart. A host it starts gets
// the idle grace of IdleGraceFromEnv unless the options give one. When the
// host it found turns out incompatible, it looks again once — the host
// may just have been replaced — before failing. A host that serves its
// maximum of connections is dialled again until one is free or ctx ends,
// and then Open returns its *client.RefusedError. started reports whether
// this call started the host.
func Open(ctx context.Context, opts OpenOptions) (c *client.Conn, info client.HostInfo, started bool, err error) {
	act, err := Resolve(opts.Activation)
	if err != nil {
		return nil, client.HostInfo{}, false, err
	}
	if !opts.NoStart && len(act.Command) == 0 {
		return nil, client.HostInfo{}, false, errors.New("open: Activation.Command is empty: want the argv that runs a host, or NoStart")
	}
	if act.IdleGrace == 0 {
		if act.IdleGrace, err = IdleGraceFromEnv(); err != nil {
			return nil, client.HostInfo{}, false, err
		}
	}
	act.Command = append(act.Command[:len(act.Command):len(act.Command)], opts.HostArgs...)
	for attempt := 0; ; attempt++ {
		c, err = nil, nil
		if attempt == 0 && len(opts.HostArgs) == 0 && !act.Replace {
			c, info, err = dialRegistered(ctx, act, opts.Options)
		}
		if c == nil && err == nil {
			info, started, err = locate(ctx, act, opts.NoStart)
			if err != nil {
				return nil, client.HostInfo{}, false, err
			}
			if len(opts.HostArgs) > 0 && !started {
				return nil, info, false, ErrHostRunning
			}
			c, err = dialServed(ctx, info.Endpoint, opts.Options)
		}
		var inc *client.IncompatibleError
		if errors.As(err, &inc) && attempt == 0 {
			continue
		}
		if err != nil {
			return nil, client.HostInfo{}, false, err
		}
		return c, info, started, nil
	}
}

// dialRegistered dials the host registered for act when its record says
// ready and its process runs, without the liveness probe of discovery:
// the handshake proves the host alive. It returns no connection and no
// error when there is no such record or nothing answers at its endpoint;
// discovery, which cleans up after dead hosts, decides then. A host that
// refused the connection, and a Dial that lasted until ctx ended (a host
// too busy to take the connection), are returned as they failed.
func dialRegistered(ctx context.Context, act Options, opts client.Options) (*client.Conn, client.HostInfo, error) {
	info, _, h := readRegistration(act.RuntimeDir, act.HostID)
	if h != hostLive || info.State != protocol.StateReady {
		return nil, client.HostInfo{}, nil
	}
	c, err := dialServed(ctx, info.Endpoint, opts)
	var (
		inc *client.IncompatibleError
		ref *client.RefusedError
	)
	if err != nil && !errors.As(err, &inc) && !errors.As(err, &ref) && ctx.Err() == nil {
		return nil, client.HostInfo{}, nil
	}
	return c, info, err
}

// dialServed dials endpoint as client.Dial does, and when the host refuses
// the connection because it serves its maximum of connections, dials
// again, waiting longer each time, until a slot is free or ctx ends: then
// it returns the refusal.
func dialServed(ctx context.Context, endpoint string, opts client.Options) (*client.Conn, error) {
	again := dialRetryMin
	for {
		c, err := client.Dial(ctx, endpoint, opts)
		var ref *client.RefusedError
		if !errors.As(err, &ref) {
			return c, err
		}
		if _, werr := sleep(ctx, again); werr != nil {
			return nil, err
		}
		again = min(2*again, dialRetryMax)
	}
}

// locate finds or starts the host of act. With noStart it starts none: it
// removes what a dead host of act's id left, and returns the live host or
// client.ErrNoHost.
func locate(ctx context.Context, act Options, noStart bool) (client.HostInfo, bool, error) {
	if !noStart {
		return EnsureHost(ctx, act)
	}
	reapActivated()
	if _, _, err := inspectHost(ctx, act.RuntimeDir, act.HostID); err != nil {
		return client.HostInfo{}, false, err
	}
	info, err := client.FindHost(ctx, act.RuntimeDir, act.HostID)
	return info, false, err
}

// WaitExited waits until the process of the host info names has exited (a
// zombie counts as exited), or returns ctx's error. It waits on an event,
// the process's pidfd, where the kernel has one (see proc.WaitExit).
func WaitExited(ctx context.Context, info client.HostInfo) error {
	if err := proc.WaitExit(ctx, info.PID); err != nil {
		return fmt.Errorf("host %s (pid %d) did not exit: %w", info.HostID, info.PID, err)
	}
	return nil
}
