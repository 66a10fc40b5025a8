package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/host"
	"github.com/agentd-dev/agentd/internal/redact"
	"github.com/agentd-dev/agentd/internal/sessions"
	"github.com/agentd-dev/agentd/internal/version"
)

func newHostCmd(e *env) *cobra.Command {
	var (
		idleGrace time.Duration
		logFormat string
		logLevel  string
		logFile   string
		defModel  string
	)
	cmd := &cobra.Command{
		Use:   "host",
		Short: "Run the agentd host for this home in the foreground.",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if idleGrace < 0 {
				return usagef("--idle-grace must not be negative")
			}
			out := e.stderr
			if logFile != "" {
				var err error
				if logFile, err = filepath.Abs(logFile); err != nil {
					return err
				}
				f, err := openLog(logFile)
				if err != nil {
					return err
				}
				defer f.Close()
				out = f
			}
			logger, err := newLogger(out, logFormat, logLevel)
			if err != nil {
				return err
			}
			act, err := client.ResolveActivation(client.ActivationOptions{})
			if err != nil {
				return err
			}
			reg, _, err := providers(act.Home)
			if err != nil {
				return err
			}
			m := models{reg: reg}
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
			h, err := host.Start(host.Config{
				Home: act.Home, RuntimeDir: act.RuntimeDir, HostID: act.HostID,
				Version: version.String(), IdleGrace: idleGrace, Logger: logger, LogFile: logFile,
				Compose: sessions.Compose(sessions.Config{
					Home: act.Home, RuntimeDir: act.RuntimeDir, HostID: act.HostID,
					WorkerIdleGrace: workerGrace, WorkerLog: out, WorkerLogFormat: logFormat,
					Models: m, Logger: logger,
				}),
			})
			if err != nil {
				return err
			}
			select {
			case <-cmd.Context().Done():
				logger.Info("signal received; draining")
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := h.Shutdown(ctx); err != nil {
					return fmt.Errorf("draining: %w", err)
				}
			case <-h.Done():
			}
			return h.Err()
		},
	}
	cmd.Flags().DurationVar(&idleGrace, "idle-grace", 0, "retire after this long with no client and nothing running (0: never)")
	cmd.Flags().StringVar(&logFormat, "log-format", "text", "log format on stderr: text or json")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	cmd.Flags().StringVar(&logFile, "log-file", "", "append logs to this file instead of stderr")
	cmd.Flags().StringVar(&defModel, "default-model", "", "the model (provider/model) of new sessions when none was selected")
	return cmd
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	switch format {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, usagef("--log-format %q: want text or json", format)
	}
	return slog.New(redact.NewHandler(h)).With("pid", os.Getpid()), nil
}

// maxLogBytes is the size past which a log file is rotated at start.
const maxLogBytes = 8 << 20

// openLog opens path for appending, first moving it to path.1 when it has
// grown past maxLogBytes.
func openLog(path string) (*os.File, error) {
	if fi, err := os.Stat(path); err == nil && fi.Size() > maxLogBytes {
		os.Rename(path, path+".1")
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the log: %w", err)
	}
	return f, nil
}
