// Package host is agentd's daemon: it owns one home through an exclusive
// lock, listens on the home's 0600 socket in the runtime directory,
// publishes its registration there as it moves through its states, and
// serves clients with a server whose composition (the session service)
// fills the operation table.
//
// It knows nothing of sessions, workers or providers: those are the
// composition's, plugged in through Config.Compose.
package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"net"

	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/internal/server"
	"github.com/agentd-dev/agentd/protocol"
)

// Config configures a host.
type Config struct {
	Home       string
	RuntimeDir string
	HostID     string
	Version    string
	// IdleGrace is how long the host stays with no connection and nothing
	// busy before it retires; zero means never.
	IdleGrace time.Duration
	// HandshakeTimeout bounds the wait for a client's hello (default 10s).
	HandshakeTimeout time.Duration
	// DrainTimeout bounds how long in-flight operations may run once the
	// host drains before they are cancelled (default 10s).
	DrainTimeout time.Duration
	Logger       *slog.Logger
	// Held, when set, is called once the home is held, before anything
	// else of it is touched, to complete the configuration (Logger,
	// Compose): a log opened there is opened, and rotated, only by the
	// process that owns the home, never by one refused it.
	Held func(cfg *Config) error
	// LogFile is the file Logger writes to, for host.status; empty when
	// it is not a file.
	LogFile string
	// Compose builds the composition; nil serves only the host operations.
	Compose server.ComposeFunc
}

// ErrStopped is wrapped by the error Run returns when the host stopped as
// it was asked to (see server.ErrStopped).
var ErrStopped = server.ErrStopped

// Host is a daemon that holds a home: Open takes it, Run serves it.
type Host struct {
	*server.Server
	cfg  Config         // constant
	lock *home.HomeLock // constant
	ln   net.Listener   // constant: the home's socket
}

// Open takes the home, listens on its socket (replacing a dead host's) and
// removes what a dead host of its id left of its registration. The host
// holds the home from then on: Run serves it and lets it go.
func Open(cfg Config) (*Host, error) {
	if cfg.Home == "" || cfg.RuntimeDir == "" {
		return nil, errors.New("host: Home and RuntimeDir are required")
	}
	if err := protocol.ValidHostID(cfg.HostID); err != nil {
		return nil, err
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if err := home.PrepareHome(cfg.Home); err != nil {
		return nil, err
	}
	lock, err := home.Lock(cfg.Home)
	if err != nil {
		return nil, err
	}
	if cfg.Held != nil {
		if err := cfg.Held(&cfg); err != nil {
			lock.Release()
			return nil, err
		}
	}
	loose, err := home.PrepareRuntimeDir(cfg.RuntimeDir)
	if err != nil {
		lock.Release()
		return nil, err
	}
	if loose != 0 && cfg.Logger != nil {
		cfg.Logger.Info("runtime directory's mode set to 0700", "dir", cfg.RuntimeDir, "was", fmt.Sprintf("%04o", loose))
	}
	ln, err := home.Listen(cfg.RuntimeDir, cfg.HostID)
	if err != nil {
		lock.Release()
		return nil, err
	}
	if err := home.RemoveStaleRegistration(cfg.RuntimeDir, cfg.HostID); err != nil {
		ln.Close()
		lock.Release()
		return nil, err
	}
	if err := lock.Announce(protocol.SocketPath(cfg.RuntimeDir, cfg.HostID)); err != nil {
		ln.Close()
		lock.Release()
		return nil, err
	}
	h := &Host{cfg: cfg, lock: lock, ln: ln}
	srv, err := server.New(server.Config{
		HostID: cfg.HostID, Version: cfg.Version, IdleGrace: cfg.IdleGrace,
		Home: cfg.Home, LogFile: cfg.LogFile,
		HandshakeTimeout: cfg.HandshakeTimeout, DrainTimeout: cfg.DrainTimeout,
		Logger: cfg.Logger, Compose: cfg.Compose,
		Operations: h.operations(),
		OnState:    h.publish,
	})
	if err != nil {
		ln.Close()
		lock.Release()
		return nil, err
	}
	h.Server = srv
	return h, nil
}

// Run publishes the host's registration as it moves through its states
// and serves its clients until it stops, then removes the registration
// and lets go of the home. Cancelling ctx drains the host. The error says
// why it stopped, wrapping ErrStopped when it stopped as asked.
func (h *Host) Run(ctx context.Context) error {
	defer h.release()
	return h.Server.Run(ctx, h.ln)
}

// Endpoint is the socket path clients connect to.
func (h *Host) Endpoint() string { return h.ln.Addr().String() }

// publish writes the registration record of the host in state.
func (h *Host) publish(srv *server.Server, state string) error {
	return home.WriteRegistration(h.cfg.RuntimeDir, protocol.Registration{
		SchemaVersion:      protocol.RegistrationSchemaVersion,
		HostID:             h.cfg.HostID,
		PID:                os.Getpid(),
		Endpoint:           h.Endpoint(),
		Home:               h.cfg.Home,
		HostEpoch:          srv.Epoch(),
		State:              state,
		ProtocolMin:        protocol.ProtocolVersion,
		ProtocolMax:        protocol.ProtocolVersion,
		CompatibilityEpoch: protocol.CompatibilityEpoch,
		Version:            h.cfg.Version,
		StartedAt:          srv.StartedAt(),
	})
}

// release removes the registration and lets go of the home.
func (h *Host) release() {
	if err := home.RemoveRegistration(h.cfg.RuntimeDir, h.cfg.HostID); err != nil {
		h.Logger().Warn("removing registration", "err", err)
	}
	h.lock.Release()
}
