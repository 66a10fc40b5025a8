package client

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/agentd-dev/agentd/protocol"
)

// HostInfo is a host found in a runtime directory: its registration record
// and where that record lives.
type HostInfo struct {
	protocol.Registration
	RegistrationPath string
}

// ErrNoHost is returned by FindHost when no live host of the id asked for
// is registered.
var ErrNoHost = errors.New("no agentd host is running")

// Timing of discovery and of the dial.
const (
	// probeTimeout bounds the dial that tells a live host's socket from a
	// dead one's.
	probeTimeout = time.Second
	// A host whose queue of connections not yet accepted is full refuses
	// a connection at once (EAGAIN); Dial tries again after dialRetryMin,
	// then after doubling waits up to dialRetryMax, until its context
	// ends.
	dialRetryMin = time.Millisecond
	dialRetryMax = 50 * time.Millisecond
)

// Discover returns the live hosts registered in the runtime directory dir,
// sorted by host id. A missing dir yields no hosts and no error.
//
// A host is live when its registration decodes (see
// protocol.ParseRegistration) and a unix dial to its endpoint succeeds
// (the connection is closed at once, before any handshake) or finds the
// socket's queue of connections full (a busy host). A registration whose
// socket is missing, refuses connections or cannot be told is skipped, as
// is one that cannot be read or decoded.
//
// Discover only reads: it leaves a dead host's files where they are. A
// host that starts in their place replaces them, and the agentd command
// removes them when it looks for hosts.
//
// A host must listen on its socket before it publishes its registration;
// otherwise a Discover in between takes it for a dead one.
func Discover(ctx context.Context, dir string) ([]HostInfo, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("discover hosts: %w", err)
	}
	var hosts []HostInfo
	for _, e := range ents {
		id := protocol.HostIDOfRegistration(e.Name())
		if id == "" || !e.Type().IsRegular() {
			continue
		}
		info, live, err := lookHost(ctx, dir, id)
		if err != nil {
			return nil, fmt.Errorf("discover hosts: %w", err)
		}
		if live {
			hosts = append(hosts, info)
		}
	}
	slices.SortFunc(hosts, func(a, b HostInfo) int { return strings.Compare(a.HostID, b.HostID) })
	return hosts, nil
}

// FindHost returns the live host id registered in the runtime directory
// dir, as Discover tells a live host, or ErrNoHost. Its state may be any:
// a host that is not ready yet answers host.status all the same.
func FindHost(ctx context.Context, dir, id string) (HostInfo, error) {
	if err := protocol.ValidHostID(id); err != nil {
		return HostInfo{}, fmt.Errorf("find host: %w", err)
	}
	info, live, err := lookHost(ctx, dir, id)
	if err != nil {
		return HostInfo{}, fmt.Errorf("find host %s: %w", id, err)
	}
	if !live {
		return HostInfo{}, ErrNoHost
	}
	return info, nil
}

// lookHost reads host id's registration in dir and reports whether the
// host lives. Its only error is ctx's.
func lookHost(ctx context.Context, dir, id string) (HostInfo, bool, error) {
	info, err := ReadRegistration(dir, id)
	if err != nil {
		return info, false, ctx.Err()
	}
	dialErr := probeSocket(ctx, info.Endpoint)
	if err := ctx.Err(); err != nil {
		return info, false, err
	}
	return info, dialErr == nil || busy(dialErr), nil
}

// ReadRegistration reads host id's registration in the runtime directory
// dir and decodes it (see protocol.ParseRegistration), without asking
// whether its host lives. A record that names another host is an error;
// no record at all gives one satisfying errors.Is(err, fs.ErrNotExist).
func ReadRegistration(dir, id string) (HostInfo, error) {
	info := HostInfo{RegistrationPath: protocol.RegistrationPath(dir, id)}
	b, err := os.ReadFile(info.RegistrationPath)
	if err != nil {
		return info, fmt.Errorf("read registration: %w", err)
	}
	if info.Registration, err = protocol.ParseRegistration(b); err != nil {
		return info, fmt.Errorf("read %s: %w", info.RegistrationPath, err)
	}
	if info.HostID != id {
		return info, fmt.Errorf("read %s: registration: hostId %q names another host", info.RegistrationPath, info.HostID)
	}
	return info, nil
}

// probeSocket dials the unix socket at path once and closes the
// connection at once.
func probeSocket(ctx context.Context, path string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return err
	}
	return c.Close()
}

// busy reports whether a dial failed because the listener's queue of
// connections not yet accepted is full: connect(2) on a unix socket fails
// at once with EAGAIN then, and the standard library reports that as a
// timeout (net.Error's Timeout) — one that is not a deadline passing.
func busy(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() &&
		!errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, context.DeadlineExceeded)
}

// dialUnix connects to the unix socket at path. A listener whose queue of
// connections not yet accepted is full fails a connect at once (EAGAIN)
// rather than making it wait: its host lives and is busy, so dialUnix
// tries again, waiting longer each time, until ctx ends.
func dialUnix(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	again := dialRetryMin
	t := time.NewTimer(again)
	defer t.Stop()
	for {
		c, err := d.DialContext(ctx, "unix", path)
		if err == nil || !busy(err) {
			return c, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (the host stayed too busy to take the connection: %w)", err, ctx.Err())
		case <-t.C:
		}
		again = min(2*again, dialRetryMax)
		t.Reset(again)
	}
}
