// Package activation starts a host on demand (cold activation) for the
// agentd command, its tests and its benchmarks: it finds the host of a
// home in the runtime directory, and when none is ready starts one with the
// command it is given, waits for it to register as ready, and removes what
// dead hosts left behind. Concurrent activations of one home, in one
// process or several, start exactly one host.
//
// The public client reaches a running host and starts none; this package
// is the one place that starts one. It knows the host only as a command to
// run and the files the host publishes (see protocol's layout), never the
// host's code.
package activation

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gofrs/flock"
	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/fswatch"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/internal/proc"
	"github.com/agentd-dev/agentd/protocol"
)

// Timing of cold activation.
const (
	// DefaultTimeout bounds EnsureHost when its context has no deadline.
	DefaultTimeout = 10 * time.Second

	// EnsureHost waits for a change of the registration or the started
	// host's stderr, and looks again after each. So as not to miss what no
	// change reports (a host that exits while its stderr is held
	// elsewhere, another activation letting go of the lock, a system
	// without inotify), it also looks again when nothing has changed for
	// recheckMin, then after doubling waits up to recheckMax.
	recheckMin = time.Millisecond
	recheckMax = 50 * time.Millisecond
)

// LockName is the file in the home that serialises cold activations, so
// that concurrent ones start exactly one host.
const LockName = "activation.lock"

// Options say how EnsureHost finds or starts a host. Empty placement
// fields take the layout's defaults; Command is required.
type Options struct {
	// Home is the host's home; default protocol.DefaultHome().
	Home string
	// RuntimeDir is where hosts register; default
	// protocol.DefaultRuntimeDir().
	RuntimeDir string
	// HostID names the host; default protocol.DefaultHostID(Home).
	HostID string
	// Command is the argv that runs a host, such as the agentd binary
	// and "host" with its flags. A relative path in Command[0] is taken
	// from the working directory of this process.
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

// Resolve fills the empty placement fields of opts (Home, RuntimeDir,
// HostID) from the environment, as protocol's layout says, and checks a
// given HostID. It leaves Command alone.
func Resolve(opts Options) (Options, error) {
	var err error
	if opts.Home == "" {
		if opts.Home, err = protocol.DefaultHome(); err != nil {
			return opts, err
		}
	}
	if opts.RuntimeDir == "" {
		if opts.RuntimeDir, err = protocol.DefaultRuntimeDir(); err != nil {
			return opts, err
		}
	}
	if opts.HostID == "" {
		if opts.HostID, err = protocol.DefaultHostID(opts.Home); err != nil {
			return opts, err
		}
	} else if err := protocol.ValidHostID(opts.HostID); err != nil {
		return opts, err
	}
	return opts, nil
}

// EnsureHost returns the ready host opts.HostID registered in
// opts.RuntimeDir, starting one with opts.Command when there is none (cold
// activation). The boolean reports whether this call started the host it
// returns.
//
// Concurrent activations of one home, in this process or others, serialise
// on <home>/activation.lock and re-check discovery under it, so together
// they start exactly one host; one that finds the host ready while it
// waits for the lock returns it. No host is started while one holds the
// home's lock (see protocol.HomeLockName) without answering yet: one
// starting, busy, or draining; EnsureHost waits for it to be ready or to
// let go of the home. The host is started detached, in its own process
// group, with its working directory at "/", stdin and stdout on
// /dev/null, and AGENTD_HOME, AGENTD_RUNTIME_DIR and AGENTD_HOST_ID set.
// Its stderr goes to an unlinked file in the home, copied to opts.Stderr
// until the host is ready and quoted in the error if it exits before; a
// host should point its stderr at its own log once ready.
//
// EnsureHost waits until the host's registration says ready and the host
// answers on its socket. It looks again whenever the registration or the
// host's stderr changes (through inotify, where there is one), and
// otherwise at most 50ms apart. Without a deadline on ctx it waits at most
// DefaultTimeout. A host that is not ready in time is left running: it may
// still finish starting, and the next call will find it.
func EnsureHost(ctx context.Context, opts Options) (client.HostInfo, bool, error) {
	opts, err := Resolve(opts)
	if err != nil {
		return client.HostInfo{}, false, fmt.Errorf("activate host: %w", err)
	}
	if len(opts.Command) == 0 || opts.Command[0] == "" {
		return client.HostInfo{}, false, fmt.Errorf("activate host %s: Command is empty: want the argv that runs a host", opts.HostID)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	reapActivated()

	info, h, err := inspectHost(ctx, opts.RuntimeDir, opts.HostID)
	if err != nil {
		return client.HostInfo{}, false, fmt.Errorf("activate host %s: %w", opts.HostID, err)
	}
	if h == hostLive && info.State == protocol.StateReady && !opts.Replace {
		return info, false, nil
	}

	if err := os.MkdirAll(opts.Home, 0o700); err != nil {
		return client.HostInfo{}, false, fmt.Errorf("activate host %s: %w", opts.HostID, err)
	}
	w := fswatch.New()
	defer w.Close()
	// Watched before the first look under the lock, so that no change
	// after it is missed.
	w.Entry(protocol.RegistrationPath(opts.RuntimeDir, opts.HostID))
	var again recheck
	lock, info, err := lockActivation(ctx, opts, w, &again)
	if err != nil {
		return client.HostInfo{}, false, fmt.Errorf("activate host %s: %w", opts.HostID, err)
	}
	if lock == nil {
		return info, false, nil // made ready by another activation
	}
	defer lock.Unlock()

	var (
		child *activatedHost
		held  bool // a host that does not answer holds the home
	)
	defer func() {
		if child != nil {
			child.close()
		}
	}()
	again = recheck{}
	for {
		info, h, err := inspectHost(ctx, opts.RuntimeDir, opts.HostID)
		if err != nil {
			return client.HostInfo{}, false, waitError(opts, child, held, err)
		}
		if child != nil {
			child.forward(opts.Stderr)
		}
		switch {
		case h == hostLive && info.State == protocol.StateReady && opts.Replace && child == nil:
			// The host to replace: start the one replacing it.
			if child, err = startHost(opts, w); err != nil {
				return client.HostInfo{}, false, fmt.Errorf("activate host %s: %w", opts.HostID, err)
			}
		case h == hostLive && info.State == protocol.StateReady && (!opts.Replace || info.PID == child.pid):
			return info, child != nil && info.PID == child.pid, nil
		case child != nil:
			if status, exited := child.exited(); exited {
				return client.HostInfo{}, false, fmt.Errorf("activate host %s: %s (pid %d) exited before it was ready (%s)%s",
					opts.HostID, opts.Command[0], child.pid, status, child.stderrTail())
			}
		case h != hostLive:
			// None registered, or a dead or unreadable record: start one,
			// unless a host holds the home all the same. A live host that
			// is not ready yet is waited for too.
			if held = home.Held(opts.Home); held {
				break
			}
			if child, err = startHost(opts, w); err != nil {
				return client.HostInfo{}, false, fmt.Errorf("activate host %s: %w", opts.HostID, err)
			}
		}
		if err := again.wait(ctx, w); err != nil {
			return client.HostInfo{}, false, waitError(opts, child, held, err)
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
func (r *recheck) wait(ctx context.Context, w *fswatch.Watcher) error {
	if r.d == 0 {
		r.d = recheckMin
	}
	changed, err := w.Wait(ctx, r.d)
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

func waitError(opts Options, child *activatedHost, held bool, err error) error {
	switch {
	case held:
		return fmt.Errorf("activate host %s: a host holds home %s but does not answer at its socket: %w", opts.HostID, opts.Home, err)
	case child == nil:
		return fmt.Errorf("activate host %s: waiting for it to be ready: %w", opts.HostID, err)
	}
	return fmt.Errorf("activate host %s: waiting for pid %d to be ready (left running): %w%s",
		opts.HostID, child.pid, err, child.stderrTail())
}

// lockActivation takes the activation lock of opts.Home, an exclusive
// flock on <home>/activation.lock, without a goroutine blocked in the
// kernel, so that ctx can end the wait. While another activation holds
// it, the host that one starts may become ready: unless opts.Replace,
// lockActivation then returns that host and no lock. It looks again
// whenever w reports a change, and as again paces it. (A failed try opens
// and closes the lock file, so the file's own events would wake every
// waiter at once: they are not watched.)
func lockActivation(ctx context.Context, opts Options, w *fswatch.Watcher, again *recheck) (*flock.Flock, client.HostInfo, error) {
	path := filepath.Join(opts.Home, LockName)
	fl := flock.New(path, flock.SetFlag(os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW), flock.SetPermissions(0o600))
	for {
		locked, err := fl.TryLock()
		if err != nil {
			return nil, client.HostInfo{}, fmt.Errorf("lock %s: %w", path, err)
		}
		if locked {
			return fl, client.HostInfo{}, nil
		}
		if !opts.Replace {
			info, h, err := inspectHost(ctx, opts.RuntimeDir, opts.HostID)
			if err != nil {
				return nil, client.HostInfo{}, fmt.Errorf("waiting for another activation to finish: %w", err)
			}
			if h == hostLive && info.State == protocol.StateReady {
				return nil, info, nil
			}
		}
		if err := again.wait(ctx, w); err != nil {
			return nil, client.HostInfo{}, fmt.Errorf("waiting for another activation to finish: %w", err)
		}
	}
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
// outlives this process, so nothing waits on it but exited and
// reapActivated. w watches the host's stderr file, so that what the host
// writes there, and its exit, wake the activation.
func startHost(opts Options, w *fswatch.Watcher) (*activatedHost, error) {
	errf, err := os.CreateTemp(opts.Home, "activation-*.stderr")
	if err != nil {
		return nil, err
	}
	w.File(errf.Name())
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
	var ws unix.WaitStatus
	pid, err := unix.Wait4(a.pid, &ws, unix.WNOHANG, nil)
	switch {
	case err == nil && pid == a.pid:
		a.reaped = true
		return describeWaitStatus(ws), true
	case err == nil:
		return "", false
	}
	// Not our child to wait for (already collected elsewhere): fall back
	// to whether it runs.
	if !proc.Running(a.pid) {
		a.reaped = true
		return "exit status unknown", true
	}
	return "", false
}

func describeWaitStatus(ws unix.WaitStatus) string {
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
// of this process until it is waited for; Discover and EnsureHost collect
// the ones that have ended, so a long-lived process does not pile them up.
// No goroutine waits on them: the host outlives the process that started
// it.
var activated struct {
	mu   sync.Mutex
	pids []int // guarded by mu
}

func reapActivated() {
	activated.mu.Lock()
	defer activated.mu.Unlock()
	activated.pids = slices.DeleteFunc(activated.pids, func(pid int) bool {
		var ws unix.WaitStatus
		got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		return err != nil || got == pid
	})
}
