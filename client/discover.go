package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentd-dev/agentd/protocol"
)

// HostInfo is a live host found in a runtime directory: its registration
// record and where that record lives.
type HostInfo struct {
	protocol.Registration
	RegistrationPath string
}

// Timing of discovery and cold activation.
const (
	// DefaultActivationTimeout bounds EnsureHost when its context has no
	// deadline.
	DefaultActivationTimeout = 10 * time.Second

	// probeTimeout bounds the dial that tells a live host's socket from a
	// dead one's.
	probeTimeout = time.Second
	// A host whose queue of connections not yet accepted is full refuses
	// a connection at once (EAGAIN); Dial tries again after dialRetryMin,
	// then after doubling waits up to dialRetryMax, until its context
	// ends.
	dialRetryMin = time.Millisecond
	dialRetryMax = 50 * time.Millisecond
	// EnsureHost waits for a change of the registration, the activation
	// lock or the started host's stderr, and looks again after each. So as
	// not to miss what no change reports (a host that exits while its
	// stderr is held elsewhere, a system without inotify), it also looks
	// again when nothing has changed for recheckMin, then after doubling
	// waits up to recheckMax.
	recheckMin = time.Millisecond
	recheckMax = 50 * time.Millisecond
)

// ActivationLockName is the file in the home that serialises cold
// activations, so that concurrent ones start exactly one host.
const ActivationLockName = "activation.lock"

// Discover returns the live hosts registered in the runtime directory dir,
// sorted by host id. A missing dir yields no hosts and no error.
//
// A host is live when its process exists and a unix dial to its endpoint
// succeeds (the connection is closed at once, before any handshake) or
// finds the socket's queue of connections full (a busy host). A
// registration whose process is gone, or whose process exists but whose
// socket is missing or refuses connections, is stale: Discover removes it,
// and the host's socket file when that socket does not accept connections.
// A registration Discover cannot read or decode is skipped and left alone,
// as is one whose liveness it cannot decide (a dial that fails otherwise).
//
// A host must listen on its socket before it publishes its registration;
// otherwise a Discover in between takes it for a dead one.
func Discover(ctx context.Context, dir string) ([]HostInfo, error) {
	reapActivated()
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
		info, h, err := inspectHost(ctx, dir, id)
		if err != nil {
			return nil, fmt.Errorf("discover hosts: %w", err)
		}
		if h == hostLive {
			hosts = append(hosts, info)
		}
	}
	slices.SortFunc(hosts, func(a, b HostInfo) int { return strings.Compare(a.HostID, b.HostID) })
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
func inspectHost(ctx context.Context, dir, id string) (HostInfo, hostHealth, error) {
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
		if dialErr == nil || errors.Is(dialErr, syscall.EAGAIN) {
			return info, hostLive, nil
		}
		if !refusedOrMissing(dialErr) {
			return info, hostUnknown, nil
		}
	}

	// Stale. Remove the record only if it is still the one read: a new host
	// renames a fresh file (a new inode) into place.
	if now, err := os.Lstat(info.RegistrationPath); err == nil && os.SameFile(before, now) {
		os.Remove(info.RegistrationPath)
	}
	removeDeadSocket(ctx, protocol.SocketPath(dir, id))
	return info, hostStale, nil
}

// readRegistration reads host id's registration in dir. It reports
// hostLive for a well-formed record whose process exists (its socket
// unchecked), hostStale for one whose process is gone, and hostAbsent or
// hostUnknown for no record or one it cannot read or decode. The file's
// identity comes with it, so that a stale record is removed only while it
// is still the one read.
func readRegistration(dir, id string) (HostInfo, os.FileInfo, hostHealth) {
	path := protocol.RegistrationPath(dir, id)
	info := HostInfo{RegistrationPath: path}
	before, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return info, nil, hostAbsent
	}
	if err != nil || !before.Mode().IsRegular() {
		return info, nil, hostUnknown
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return info, nil, hostAbsent
	}
	if err != nil {
		return info, nil, hostUnknown
	}
	// The writer renames a whole record into place, so a record that does
	// not decode is truly corrupt; still, it is not ours to delete.
	if err := json.Unmarshal(b, &info.Registration); err != nil || info.HostID != id || info.Endpoint == "" {
		return info, nil, hostUnknown
	}
	if !processExists(info.PID) {
		return info, before, hostStale
	}
	return info, before, hostLive
}

// removeDeadSocket removes the socket file at path when it is a socket that
// refuses connections. The path is the one the layout gives, never one read
// from a registration, so a corrupt record cannot point the removal
// elsewhere.
func removeDeadSocket(ctx context.Context, path string) {
	before, err := os.Lstat(path)
	if err != nil || before.Mode().Type() != fs.ModeSocket {
		return
	}
	if err := probeSocket(ctx, path); err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
		return
	}
	if now, err := os.Lstat(path); err == nil && os.SameFile(before, now) {
		os.Remove(path)
	}
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

// dialUnix connects to the unix socket at path. A listener whose queue of
// connections not yet accepted is full fails a connect at once with EAGAIN
// rather than making it wait: its host lives and is busy, so dialUnix
// tries again, waiting longer each time, until ctx ends.
func dialUnix(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	again := dialRetryMin
	for {
		c, err := d.DialContext(ctx, "unix", path)
		if !errors.Is(err, syscall.EAGAIN) {
			return c, err
		}
		if _, werr := sleep(ctx, again); werr != nil {
			return nil, fmt.Errorf("%w (the host stayed too busy to take the connection: %w)", err, werr)
		}
		again = min(2*again, dialRetryMax)
	}
}

// homeHeld reports whether a host holds the lock of home: it asks for a
// shared lock, which the kernel refuses while a host holds its exclusive
// one, and lets go at once. It creates nothing.
func homeHeld(home string) bool {
	f, err := os.OpenFile(filepath.Join(home, protocol.HomeLockName), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	return errors.Is(syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB), syscall.EWOULDBLOCK)
}

func refusedOrMissing(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)
}

// processExists reports whether a process with pid exists (a zombie
// included).
func processExists(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// ActivationOptions say how EnsureHost finds or starts a host. Empty fields
// take the layout's defaults.
type ActivationOptions struct {
	// Home is the host's home; default protocol.DefaultHome().
	Home string
	// RuntimeDir is where hosts register; default
	// protocol.DefaultRuntimeDir().
	RuntimeDir string
	// HostID names the host; default protocol.DefaultHostID(Home).
	HostID string
	// Command is the argv of the host; default the running executable with
	// the argument "host".
	Command []string
	// IdleGrace, when positive, is passed to the host as --idle-grace.
	IdleGrace time.Duration
	// Env holds extra "KEY=value" entries for the host's environment; they
	// win over the inherited environment and the AGENTD_* placement.
	Env []string
	// Stderr, when set, receives what the host writes on stderr until it
	// is ready. Default: discarded.
	Stderr io.Writer
	// Replace starts a new host even when one runs, with --replace: the
	// running host hands it the home and its live sessions. EnsureHost
	// returns once the new host is ready.
	Replace bool
}

func (o ActivationOptions) withDefaults() (ActivationOptions, error) {
	var err error
	if o.Home == "" {
		if o.Home, err = protocol.DefaultHome(); err != nil {
			return o, err
		}
	}
	if o.RuntimeDir == "" {
		if o.RuntimeDir, err = protocol.DefaultRuntimeDir(); err != nil {
			return o, err
		}
	}
	if o.HostID == "" {
		if o.HostID, err = protocol.DefaultHostID(o.Home); err != nil {
			return o, err
		}
	} else if err := protocol.ValidHostID(o.HostID); err != nil {
		return o, err
	}
	if len(o.Command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return o, fmt.Errorf("no host command: %w", err)
		}
		o.Command = []string{exe, "host"}
	}
	return o, nil
}

// EnsureHost returns the ready host opts.HostID registered in
// opts.RuntimeDir, starting one when there is none (cold activation). The
// boolean reports whether this call started the host it returns.
//
// Concurrent activations of one home, in this process or others, serialise
// on <home>/activation.lock and re-check discovery under it, so together
// they start exactly one host. No host is started while one holds the
// home's lock (see protocol.HomeLockName) without answering yet: one
// starting, busy, or draining; EnsureHost waits for it to be ready or to
// let go of the home. The host is started detached, in its own
// process group, with its working directory at "/", stdin and stdout on
// /dev/null, and AGENTD_HOME, AGENTD_RUNTIME_DIR and AGENTD_HOST_ID set.
// Its stderr goes to an unlinked file in the home, copied to opts.Stderr
// until the host is ready and quoted in the error if it exits before; a host
// should point its stderr at its own log once ready.
//
// EnsureHost waits until the host's registration says ready and the host
// answers on its socket. It looks again whenever the registration, the
// activation lock or the host's stderr changes (through inotify, where
// there is one), and otherwise at most 50ms apart. Without a deadline on ctx it waits at most
// DefaultActivationTimeout. A host that is not ready in time is left
// running: it may still finish starting, and the next call will find it.
func EnsureHost(ctx context.Context, opts ActivationOptions) (HostInfo, bool, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return HostInfo{}, false, fmt.Errorf("activate host: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultActivationTimeout)
		defer cancel()
	}
	reapActivated()

	info, h, err := inspectHost(ctx, opts.RuntimeDir, opts.HostID)
	if err != nil {
		return HostInfo{}, false, fmt.Errorf("activate host %s: %w", opts.HostID, err)
	}
	if h == hostLive && info.State == protocol.StateReady && !opts.Replace {
		return info, false, nil
	}

	if err := os.MkdirAll(opts.Home, 0o700); err != nil {
		return HostInfo{}, false, fmt.Errorf("activate host %s: %w", opts.HostID, err)
	}
	w := newChanges()
	defer w.close()
	var again recheck
	unlock, err := lockActivation(ctx, filepath.Join(opts.Home, ActivationLockName), w, &again)
	if err != nil {
		return HostInfo{}, false, fmt.Errorf("activate host %s: %w", opts.HostID, err)
	}
	defer unlock()

	var (
		child *activatedHost
		held  bool // a host that does not answer holds the home
	)
	defer func() {
		if child != nil {
			child.close()
		}
	}()
	// Watched before the first look, so that no change after it is missed.
	w.entry(protocol.RegistrationPath(opts.RuntimeDir, opts.HostID))
	again = recheck{}
	for {
		info, h, err := inspectHost(ctx, opts.RuntimeDir, opts.HostID)
		if err != nil {
			return HostInfo{}, false, waitError(opts, child, held, err)
		}
		if child != nil {
			child.forward(opts.Stderr)
		}
		switch {
		case h == hostLive && info.State == protocol.StateReady && opts.Replace && child == nil:
			// The host to replace: start the one replacing it.
			if child, err = startHost(opts, w); err != nil {
				return HostInfo{}, false, fmt.Errorf("activate host %s: %w", opts.HostID, err)
			}
		case h == hostLive && info.State == protocol.StateReady && (!opts.Replace || info.PID == child.pid):
			return info, child != nil && info.PID == child.pid, nil
		case child != nil:
			if status, exited := child.exited(); exited {
				return HostInfo{}, false, fmt.Errorf("activate host %s: %s (pid %d) exited before it was ready (%s)%s",
					opts.HostID, opts.Command[0], child.pid, status, child.stderrTail())
			}
		case h != hostLive:
			// None registered, or a dead or unreadable record: start one,
			// unless a host holds the home all the same. A live host that
			// is not ready yet is waited for too.
			if held = homeHeld(opts.Home); held {
				break
			}
			if child, err = startHost(opts, w); err != nil {
				return HostInfo{}, false, fmt.Errorf("activate host %s: %w", opts.HostID, err)
			}
		}
		if err := again.wait(ctx, w); err != nil {
			return HostInfo{}, false, waitError(opts, child, held, err)
		}
	}
}

// recheck paces the looks of a wait on changes: at once after a change,
// else after recheckMin, doubling up to recheckMax while nothing changes.
type recheck struct {
	d time.Duration
}

// wait waits for a change or for the next look's time, or returns ctx's
// error.
func (r *recheck) wait(ctx context.Context, w *changes) error {
	if r.d == 0 {
		r.d = recheckMin
	}
	changed, err := w.wait(ctx, r.d)
	if changed {
		r.d = recheckMin
	} else {
		r.d = min(2*r.d, recheckMax)
	}
	return err
}

// sleep waits d and reports no change, or returns ctx's error when ctx
// ends first.
func sleep(ctx context.Context, d time.Duration) (bool, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-t.C:
		return false, nil
	}
}

func waitError(opts ActivationOptions, child *activatedHost, held bool, err error) error {
	switch {
	case held:
		return fmt.Errorf("activate host %s: a host holds home %s but does not answer at its socket: %w", opts.HostID, opts.Home, err)
	case child == nil:
		return fmt.Errorf("activate host %s: waiting for it to be ready: %w", opts.HostID, err)
	}
	return fmt.Errorf("activate host %s: waiting for pid %d to be ready (left running): %w%s",
		opts.HostID, child.pid, err, child.stderrTail())
}

// lockActivation takes an exclusive flock on path. It waits without a
// goroutine blocked in the kernel, so that ctx can end the wait: it tries
// again whenever a holder closes the file (letting go of the lock), and
// as again paces it.
func lockActivation(ctx context.Context, path string, w *changes, again *recheck) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	watched := false
	for {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if !watched {
			// Watched, then tried once more, so that a release between
			// the first try and the watch is not missed.
			w.file(path)
			watched = true
			continue
		}
		if err := again.wait(ctx, w); err != nil {
			f.Close()
			return nil, fmt.Errorf("waiting for another activation to finish: %w", err)
		}
	}
	return func() {
		syscall.Flock(fd, syscall.LOCK_UN)
		f.Close()
	}, nil
}

// activatedHost is a host process EnsureHost started and has not yet seen
// ready or exited.
type activatedHost struct {
	pid       int
	stderr    *os.File // read side of the host's stderr file, already unlinked
	forwarded int64    // bytes of stderr copied to the caller's writer
	reaped    bool     // exited has collected the process's status
}

// startHost starts the host process detached and releases it: the host
// outlives this client, so nothing waits on it but exited and
// reapActivated. w watches the host's stderr file, so that what the host
// writes there, and its exit, wake the activation.
func startHost(opts ActivationOptions, w *changes) (*activatedHost, error) {
	errf, err := os.CreateTemp(opts.Home, "activation-*.stderr")
	if err != nil {
		return nil, err
	}
	w.file(errf.Name())
	childErr, err := os.OpenFile(errf.Name(), os.O_WRONLY|os.O_APPEND, 0)
	// Unlinked at once: the host keeps its descriptor, and no file is left
	// behind whatever happens to this process.
	os.Remove(errf.Name())
	if err != nil {
		errf.Close()
		return nil, err
	}
	defer childErr.Close()

	args := slices.Clone(opts.Command)
	// The host runs in "/", where a relative command would mean another
	// file.
	if strings.ContainsRune(args[0], filepath.Separator) {
		if args[0], err = filepath.Abs(args[0]); err != nil {
			errf.Close()
			return nil, err
		}
	}
	if opts.IdleGrace > 0 {
		args = append(args, "--idle-grace", opts.IdleGrace.String())
	}
	if opts.Replace {
		args = append(args, "--replace")
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(),
		protocol.EnvHome+"="+opts.Home,
		protocol.EnvRuntimeDir+"="+opts.RuntimeDir,
		protocol.EnvHostID+"="+opts.HostID,
	)
	cmd.Env = append(cmd.Env, opts.Env...)
	cmd.Dir = "/"
	cmd.Stderr = childErr // an *os.File: handed over directly, no copying goroutine
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		errf.Close()
		return nil, fmt.Errorf("start %s: %w", args[0], err)
	}
	pid := cmd.Process.Pid
	cmd.Process.Release()
	return &activatedHost{pid: pid, stderr: errf}, nil
}

// forward copies what the host wrote on stderr since the last call to w.
func (a *activatedHost) forward(w io.Writer) {
	if w == nil {
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, _ := a.stderr.ReadAt(buf, a.forwarded)
		if n == 0 {
			return
		}
		w.Write(buf[:n])
		a.forwarded += int64(n)
	}
}

// exited reports whether the host process has ended, collecting its status
// so it does not linger as a zombie of this process.
func (a *activatedHost) exited() (string, bool) {
	var ws syscall.WaitStatus
	pid, err := syscall.Wait4(a.pid, &ws, syscall.WNOHANG, nil)
	switch {
	case err == nil && pid == a.pid:
		a.reaped = true
		return describeWaitStatus(ws), true
	case err == nil:
		return "", false
	}
	// Not our child to wait for (already collected elsewhere): fall back
	// to whether the pid exists.
	if !processExists(a.pid) {
		a.reaped = true
		return "exit status unknown", true
	}
	return "", false
}

func describeWaitStatus(ws syscall.WaitStatus) string {
	switch {
	case ws.Exited():
		return fmt.Sprintf("exit status %d", ws.ExitStatus())
	case ws.Signaled():
		return "killed by signal: " + ws.Signal().String()
	}
	return fmt.Sprintf("wait status %#x", uint32(ws))
}

// stderrTailLines and stderrTailBytes bound the stderr quoted in an error.
const (
	stderrTailLines = 10
	stderrTailBytes = 4 << 10
)

// stderrTail returns the last lines the host wrote on stderr, formatted to
// end an error message, or "" when it wrote nothing.
func (a *activatedHost) stderrTail() string {
	fi, err := a.stderr.Stat()
	if err != nil || fi.Size() == 0 {
		return ""
	}
	off := max(fi.Size()-stderrTailBytes, 0)
	buf := make([]byte, fi.Size()-off)
	n, _ := a.stderr.ReadAt(buf, off)
	buf = bytes.TrimRight(buf[:n], "\n\r\t ")
	if off > 0 {
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			buf = buf[i+1:]
		}
	}
	lines := strings.Split(string(buf), "\n")
	if len(lines) > stderrTailLines {
		lines = lines[len(lines)-stderrTailLines:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	return "; its stderr ends:\n\t" + strings.Join(lines, "\n\t")
}

// close lets go of the host: its stderr file, and — unless its status was
// collected — its pid goes to reapActivated.
func (a *activatedHost) close() {
	a.stderr.Close()
	if !a.reaped {
		activated.mu.Lock()
		activated.pids = append(activated.pids, a.pid)
		activated.mu.Unlock()
	}
}

// activated holds the pids of hosts this process started and released
// that have not been collected. A released child that exits stays a zombie
// of this process (and looks alive to kill(pid, 0)) until it is waited for;
// Discover and EnsureHost collect the ones that have ended, so a long-lived
// client does not pile them up. No goroutine waits on them: the host
// outlives the client.
var activated struct {
	mu   sync.Mutex
	pids []int // guarded by mu
}

func reapActivated() {
	activated.mu.Lock()
	defer activated.mu.Unlock()
	activated.pids = slices.DeleteFunc(activated.pids, func(pid int) bool {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		return err != nil || got == pid
	})
}
