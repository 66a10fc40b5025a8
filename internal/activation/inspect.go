package activation

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

	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

// probeTimeout bounds the dial that tells a live host's socket from a dead
// one's.
const probeTimeout = time.Second

// Discover is client.Discover for a program that starts hosts: it first
// collects the hosts this process started that have exited, and removes
// what dead hosts left in the runtime directory dir — a registration whose
// process is gone, or whose process exists but whose socket is missing or
// refuses connections, and the host's socket file when that socket does
// not accept connections. A registration it cannot read or decode is left
// alone, as is one whose liveness it cannot decide (a dial that fails
// otherwise). It returns the live hosts, sorted by host id: those
// client.Discover returns, from one read and one dial of each.
func Discover(ctx context.Context, dir string) ([]client.HostInfo, error) {
	return DiscoverOthers(ctx, dir, "")
}

// DiscoverOthers is Discover leaving host except out, neither read nor
// dialled: the host the caller is connected to already, which a dial of
// its own would only keep busy.
func DiscoverOthers(ctx context.Context, dir, except string) ([]client.HostInfo, error) {
	reapActivated()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("discover hosts: %w", err)
	}
	var hosts []client.HostInfo
	for _, e := range ents {
		id := protocol.HostIDOfRegistration(e.Name())
		if id == "" || id == except || !e.Type().IsRegular() {
			continue
		}
		info, h, err := inspectHost(ctx, dir, id)
		if err != nil {
			return nil, fmt.Errorf("discover hosts: %w", err)
		}
		if h == hostLive {
			hosts = append(hosts, info)
		}
	}
	slices.SortFunc(hosts, func(a, b client.HostInfo) int { return strings.Compare(a.HostID, b.HostID) })
	return hosts, nil
}

// hostHealth is what inspectHost found of one registration.
type hostHealth int

const (
	hostAbsent  hostHealth = iota // no registration
	hostLive                      // process exists and socket accepts or is busy
	hostStale                     // dead host; its files were removed
	hostUnknown                   // unreadable, corrupt, or undecidable; left alone
)

// inspectHost reads host id's registration in dir and decides whether the
// host lives, cleaning up after a dead one. Its only error is ctx's.
func inspectHost(ctx context.Context, dir, id string) (client.HostInfo, hostHealth, error) {
	info, before, h := readRegistration(dir, id)
	switch h {
	case hostAbsent, hostUnknown:
		return info, h, nil
	case hostLive:
		dialErr := probeSocket(ctx, info.Endpoint)
		if err := ctx.Err(); err != nil {
			return info, hostUnknown, err
		}
		// A full queue of connections (EAGAIN) is a host's, busy.
		if dialErr == nil || errors.Is(dialErr, unix.EAGAIN) {
			return info, hostLive, nil
		}
		if !errors.Is(dialErr, unix.ECONNREFUSED) && !errors.Is(dialErr, unix.ENOENT) {
			return info, hostUnknown, nil
		}
	}

	// Stale. Remove the record only if it is still the one read: a new host
	// renames a fresh file (a new inode) into place. The socket is left to
	// the next host of this id, which replaces it holding the home's lock:
	// a socket that refuses a connection may be that host's own, bound and
	// not yet listening, and removing it would cut the host off.
	if now, err := os.Lstat(info.RegistrationPath); err == nil && os.SameFile(before, now) {
		os.Remove(info.RegistrationPath)
	}
	return info, hostStale, nil
}

// readRegistration reads host id's registration in dir. It reports
// hostLive for a well-formed record whose process runs (its socket
// unchecked), hostStale for one whose process does not, and hostAbsent or
// hostUnknown for no record or one it cannot read or decode. The file's
// identity comes with it, so that a stale record is removed only while it
// is still the one read.
func readRegistration(dir, id string) (client.HostInfo, os.FileInfo, hostHealth) {
	path := protocol.RegistrationPath(dir, id)
	before, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return client.HostInfo{RegistrationPath: path}, nil, hostAbsent
	}
	if err != nil || !before.Mode().IsRegular() {
		return client.HostInfo{RegistrationPath: path}, nil, hostUnknown
	}
	info, err := client.ReadRegistration(dir, id)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return info, nil, hostAbsent
	case err != nil:
		// The writer renames a whole record into place, so a record that
		// does not decode is truly corrupt; still, it is not ours to
		// delete.
		return info, nil, hostUnknown
	case !proc.Running(info.PID):
		return info, before, hostStale
	}
	return info, before, hostLive
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
