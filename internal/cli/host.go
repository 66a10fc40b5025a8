//go:build !agentd_client

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/internal/atomicfile"
	"github.com/agentd-dev/agentd/internal/home"
	"github.com/agentd-dev/agentd/internal/host"
	"github.com/agentd-dev/agentd/internal/redact"
	"github.com/agentd-dev/agentd/internal/sessions"
	"github.com/agentd-dev/agentd/internal/version"
	"github.com/agentd-dev/agentd/protocol"
)

func newHostCmd(e *env) *cobra.Command {
	var (
		idleGrace time.Duration
		logFormat string
		logLevel  string
		logFile   string
		defModel  string
		replace   bool
	)
	cmd := &cobra.Command{
		Use:   "host",
		Short: shortHost,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := undumpable(); err != nil {
				return err
			}
			envKeys := takeEnvKeys()
			oneProcessor()
			if _, err := toolEnvExtra(); err != nil {
				return usagef("%v", err)
			}
			// Its workers read it: a host refuses a setting they would.
			if _, err := compactAtFromEnv(); err != nil {
				return usagef("%v", err)
			}
			if idleGrace < 0 {
				return usagef("--idle-grace must not be negative")
			}
			logTo, err := loggerFor(logFormat, logLevel)
			if err != nil {
				return err
			}
			if logFile != "" {
				if logFile, err = filepath.Abs(logFile); err != nil {
					return err
				}
			}
			act, err := activation.Resolve(activation.Options{})
			if err != nil {
				return err
			}
			keys := newKeyring(act.Home)
			keys.hand(envKeys)
			reg, err := providers(act.Home, keys, false)
			if err != nil {
				return err
			}
			defer reg.Close()
			m := models{reg: reg, keys: keys}
			if defModel != "" {
				if _, _, err := reg.Lookup(defModel); err != nil {
					return fmt.Errorf("--default-model: %w", err)
				}
				m.def = defModel
			}
			workerGrace, err := workerIdleGrace()
			if err != nil {
				return err
			}
			// The log is opened, and rotated, only once the home is
			// held: a host refused the home leaves the holder's log be.
			// Until then (a replacing host waiting for the home) it logs
			// on stderr.
			var (
				logger = logTo(e.stderr)
				logf   *os.File
			)
			defer func() {
				if logf != nil {
					logf.Close()
				}
			}()
			cfg := host.Config{
				Home: act.Home, RuntimeDir: act.RuntimeDir, HostID: act.HostID,
				Version: version.String(), IdleGrace: idleGrace, LogFile: logFile,
				Held: func(c *host.Config) error {
					var out io.Writer = e.stderr
					replaced := false
					if logFile != "" {
						f, linked, err := openLog(logFile)
						if err != nil {
							return err
						}
						logf, out, replaced = f, f, linked
					}
					logger = logTo(out)
					if replaced {
						logger.Warn("the log's path held a symbolic link: it was replaced by the log, not followed", "path", logFile)
					}
					c.Logger = logger
					c.Compose = sessions.Compose(sessions.Config{
						Home: act.Home, RuntimeDir: act.RuntimeDir, HostID: act.HostID,
						WorkerIdleGrace: workerGrace, WorkerLog: out, WorkerLogFormat: logFormat,
						Models: m, Logger: logger, WorkerKeys: envKeys,
					})
					return nil
				},
			}
			h, err := openHost(cmd.Context(), cfg, replace, logger)
			if err != nil {
				return err
			}
			// A signal ends the command's context, which drains the host.
			if err := h.Run(cmd.Context()); !errors.Is(err, host.ErrStopped) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&idleGrace, "idle-grace", 0, "retire after this long with no client and nothing running (0: never)")
	cmd.Flags().StringVar(&logFormat, "log-format", "text", "log format on stderr: text or json")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	cmd.Flags().StringVar(&logFile, "log-file", "", "append logs to this file instead of stderr")
	cmd.Flags().BoolVar(&replace, "replace", false, "take the home over from the host running for it, which hands its live sessions to this one")
	cmd.Flags().StringVar(&defModel, "default-model", "", "the model (provider/model) of new sessions when none was selected")
	return cmd
}

// undumpable makes this process undumpable, as ssh-agent does, before it
// holds a key: no core dump, and its /proc/<pid>/environ, mem and the like
// closed, as ptrace is, to every process without CAP_SYS_PTRACE, those of
// the same user (the agent's commands) included. The host and the workers
// call it first thing.
func undumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("making the process undumpable: %w", err)
	}
	return nil
}

// takeOverTimeout bounds how long a replacing host waits for the host it
// replaces to let go of the home.
const takeOverTimeout = time.Minute

// openHost opens the host of cfg. With replace, a host holding the home
// is asked to hand it over, and the home is taken once it has let go;
// without, a held home is refused with a message naming --replace.
func openHost(ctx context.Context, cfg host.Config, replace bool, logger *slog.Logger) (*host.Host, error) {
	ctx, cancel := context.WithTimeout(ctx, takeOverTimeout)
	defer cancel()
	asked := 0 // the holder last asked to hand over
	for {
		h, err := host.Open(cfg)
		var held *home.HeldError
		if !errors.As(err, &held) {
			return h, err
		}
		if !replace {
			return nil, fmt.Errorf("%w; `agentd upgrade` (or `agentd host --replace`) replaces it and keeps its sessions running", err)
		}
		if held.PID != asked && held.PID > 0 {
			switch err := askHandOff(ctx, held); {
			case errors.Is(err, client.ErrHostNotReady):
				// Still starting: it can hand over once it serves.
			case err != nil:
				return nil, err
			default:
				logger.Info("the host holding the home is handing it over", "holder", held.PID)
				asked = held.PID
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the host holding the home (pid %d) did not let go of it: %w", held.PID, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// askHandOff asks the host holding a home to hand it over.
func askHandOff(ctx context.Context, held *home.HeldError) error {
	if held.Endpoint == "" {
		return fmt.Errorf("%w: it has not said where it listens yet; try again", held)
	}
	c, err := client.Dial(ctx, held.Endpoint, client.Options{Surface: protocol.SurfaceCLI})
	if err != nil {
		return fmt.Errorf("asking the host holding the home (pid %d) to hand it over: %w", held.PID, err)
	}
	defer c.Close()
	if _, err := client.Call(ctx, c, protocol.OpHostUpgradePrepare, protocol.UpgradePrepareInput{}); err != nil {
		return fmt.Errorf("asking the host holding the home (pid %d) to hand it over: %w", held.PID, err)
	}
	return nil
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	logTo, err := loggerFor(format, level)
	if err != nil {
		return nil, err
	}
	return logTo(w), nil
}

// loggerFor checks a log format and level and returns what makes a
// redacting logger of them writing to a given writer.
func loggerFor(format, level string) (func(io.Writer) *slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	var handler func(io.Writer) slog.Handler
	switch format {
	case "text":
		handler = func(w io.Writer) slog.Handler { return slog.NewTextHandler(w, opts) }
	case "json":
		handler = func(w io.Writer) slog.Handler { return slog.NewJSONHandler(w, opts) }
	default:
		return nil, usagef("--log-format %q: want text or json", format)
	}
	return func(w io.Writer) *slog.Logger {
		return slog.New(redact.NewHandler(handler(w))).With("pid", os.Getpid())
	}, nil
}

// maxLogBytes is the size past which a log file is rotated at start.
const maxLogBytes = 8 << 20

// openLog opens path for appending, first moving it to path.1 when it has
// grown past maxLogBytes. A symbolic link at path is never followed: it
// is replaced by the log, which replaced reports.
func openLog(path string) (f *os.File, replaced bool, err error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() && fi.Size() > maxLogBytes {
		os.Rename(path, path+".1")
	}
	f, err = atomicfile.Open(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if errors.Is(err, atomicfile.ErrSymlink) {
		replaced = true
		if err = os.Remove(path); err == nil {
			f, err = atomicfile.Open(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
		}
	}
	if err != nil {
		return nil, replaced, fmt.Errorf("opening the log: %w", err)
	}
	return f, replaced, nil
}
