package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentd-dev/agentd/internal/credentials"
	"github.com/agentd-dev/agentd/internal/tools"
	"github.com/agentd-dev/agentd/internal/version"
	"github.com/agentd-dev/agentd/internal/worker"
	"github.com/agentd-dev/agentd/protocol"
)

// EnvWorkerIdleGrace sets how long an idle session's worker lives on.
const EnvWorkerIdleGrace = "AGENTD_WORKER_IDLE_GRACE"

func workerIdleGrace() (time.Duration, error) {
	v := os.Getenv(EnvWorkerIdleGrace)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive Go duration such as 30s", EnvWorkerIdleGrace, v)
	}
	return d, nil
}

const systemPrompt = `You are a coding agent working in a person's project directory through tools.
Read before you change; prefer small, exact edits; run commands to check your work.
When you are done, answer briefly with what you did and what you found.`

// handedKeys reads the keys a worker's host hands it on the file
// descriptor fd (none when fd is 0): one JSON object of provider name to
// key, up to the end of the file, which it closes.
func handedKeys(fd int) (map[string]string, error) {
	keys := map[string]string{}
	if fd <= 0 {
		return keys, nil
	}
	f := os.NewFile(uintptr(fd), "keys")
	if f == nil {
		return nil, usagef("--keys-fd %d: not an open file descriptor", fd)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, credentials.MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--keys-fd: reading the keys: %w", err)
	}
	if len(data) > credentials.MaxFileBytes {
		return nil, fmt.Errorf("--keys-fd: more than %d bytes of keys", credentials.MaxFileBytes)
	}
	if err := json.Unmarshal(data, &keys); err != nil {
		return nil, fmt.Errorf("--keys-fd: not a JSON object of keys by provider")
	}
	for name, key := range keys {
		if err := credentials.CheckProvider(name); err != nil {
			return nil, fmt.Errorf("--keys-fd: %w", err)
		}
		if err := credentials.CheckKey(key); err != nil {
			return nil, fmt.Errorf("--keys-fd: the %s key: %w", name, err)
		}
	}
	return keys, nil
}

func newWorkerCmd(e *env) *cobra.Command {
	var cfg worker.Config
	var logFormat string
	var readyFD, keysFD int
	cmd := &cobra.Command{
		Use:    "worker",
		Short:  "Run one session's worker; the host starts it, never a person.",
		Hidden: true,
		Args:   noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := undumpable(); err != nil {
				return err
			}
			// The worker's keys are those its host hands it, never its
			// environment's.
			takeEnvKeys()
			keys, err := handedKeys(keysFD)
			if err != nil {
				return err
			}
			oneProcessor()
			for flag, v := range map[string]string{"--session": cfg.Session.SessionID, "--socket": cfg.SocketPath, "--home": cfg.Home, "--cwd": cfg.Session.Cwd, "--transcript": cfg.TranscriptPath} {
				if v == "" {
					return usagef("worker needs %s", flag)
				}
			}
			logger, err := newLogger(e.stderr, logFormat, "info")
			if err != nil {
				return err
			}
			extra, err := toolEnvExtra()
			if err != nil {
				return err
			}
			reg, ring, err := providers(cfg.Home, keys)
			if err != nil {
				return err
			}
			cfg.Providers = models{reg: reg}
			cfg.ToolEnv = func() []string { return ring.toolEnv(extra) }
			cfg.Tools = tools.Builtin()
			cfg.System = systemPrompt
			cfg.Logger = logger.With("role", "worker")
			cfg.Version = version.String()
			if readyFD > 0 {
				cfg.Ready = os.NewFile(uintptr(readyFD), "ready")
			}
			// A file-size limit makes appends fail with EFBIG, reported as
			// a failed turn, instead of killing the worker.
			signal.Ignore(syscall.SIGXFSZ)
			return worker.Run(cmd.Context(), cfg)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&cfg.Session.SessionID, "session", "", "the session")
	fl.StringVar(&cfg.SocketPath, "socket", "", "where to listen for the host")
	fl.StringVar(&cfg.Home, "home", "", "the home")
	fl.StringVar(&cfg.Session.Cwd, "cwd", "", "the session's working directory")
	fl.StringVar(&cfg.Session.Model, "model", "", "the session's model")
	fl.StringVar(&cfg.Thinking, "thinking", "off", "the thinking level")
	fl.StringVar(&cfg.Approval, "approval", protocol.ApprovalAsk, "the approval policy")
	fl.StringVar(&cfg.TranscriptPath, "transcript", "", "the session's transcript")
	fl.StringVar(&cfg.PreviousExit, "previous-exit", "", "why the session's previous worker exited")
	fl.DurationVar(&cfg.OrphanGrace, "orphan-grace", 0, "how long to live on with no host connected and no turn running (0: forever)")
	fl.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	fl.IntVar(&readyFD, "ready-fd", 0, "a file descriptor to write to once the worker serves")
	fl.IntVar(&keysFD, "keys-fd", 0, "a file descriptor to read the providers' keys from, as one JSON object, to its end")
	return cmd
}
