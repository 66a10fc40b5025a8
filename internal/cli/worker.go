//go:build !agentd_client

package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentd-dev/agentd/internal/credentials"
	"github.com/agentd-dev/agentd/internal/tools"
	"github.com/agentd-dev/agentd/internal/version"
	"github.com/agentd-dev/agentd/internal/worker"
	"github.com/agentd-dev/agentd/protocol"
)

// envDuration reads a positive Go duration from the environment; 0 when
// it is not set.
func envDuration(name string) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive Go duration such as 30s", name, v)
	}
	return d, nil
}

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

// EnvCompactAt sets the host's compaction threshold: the share of a
// model's context window, in percent, past which a turn's request is
// compacted first, for sessions that set none of their own.
const EnvCompactAt = "AGENTD_COMPACT_AT"

// compactAtFromEnv reads EnvCompactAt; 0 when it is not set.
func compactAtFromEnv() (int, error) {
	v := os.Getenv(EnvCompactAt)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(strings.TrimSuffix(v, "%"))
	if err != nil || n < protocol.MinCompactAt || n > protocol.MaxCompactAt {
		return 0, fmt.Errorf("%s=%q: want a whole percent from %d to %d, such as 80", EnvCompactAt, v, protocol.MinCompactAt, protocol.MaxCompactAt)
	}
	return n, nil
}

const systemPrompt = `You are a coding agent working in a person's project directory through tools.
Read before you change; prefer small, exact edits; run commands to check your work.
When you are done, answer briefly with what you did and what you found.`

// handedKeys reads the keys a worker's host hands it on f: one JSON object
// of provider name to key, up to the end of the file, which it closes.
func handedKeys(f *os.File) (map[string]string, error) {
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, credentials.MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--keys-fd: reading the keys: %w", err)
	}
	if len(data) > credentials.MaxFileBytes {
		return nil, fmt.Errorf("--keys-fd: more than %d bytes of keys", credentials.MaxFileBytes)
	}
	keys := map[string]string{}
	if err := json.Unmarshal(data, &keys); err != nil {
		return nil, errors.New("--keys-fd: not a JSON object of keys by provider")
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

// receiveKeys hands ring the keys read from f, none when they cannot be
// read (which it logs).
func receiveKeys(ring *keyring, f *os.File, logger *slog.Logger) {
	keys, err := handedKeys(f)
	if err != nil {
		logger.Error("the keys the host handed cannot be read; the worker has none of its environment's", "err", err)
		keys = map[string]string{}
	}
	ring.hand(keys)
}

// readyThenKeys is a worker's ready file. Once it has said the worker
// serves (Close), it reads the keys its host writes only then, to a
// worker already undumpable, so that they never wait where another
// process can read them.
type readyThenKeys struct {
	io.WriteCloser
	keys   *os.File
	ring   *keyring
	logger *slog.Logger
}

func (r readyThenKeys) Close() error {
	err := r.WriteCloser.Close()
	receiveKeys(r.ring, r.keys, r.logger)
	return err
}

func newWorkerCmd(e *env) *cobra.Command {
	var cfg worker.Config
	var logFormat string
	var readyFD, keysFD int
	cmd := &cobra.Command{
		Use:    "worker",
		Short:  shortWorker,
		Hidden: true,
		Args:   noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := undumpable(); err != nil {
				return err
			}
			// The worker's keys are those its host hands it, never its
			// environment's.
			takeEnvKeys()
			var keysFile *os.File
			if keysFD > 0 {
				if keysFile = os.NewFile(uintptr(keysFD), "keys"); keysFile == nil {
					return usagef("--keys-fd %d: not a file descriptor", keysFD)
				}
			}
			oneProcessor()
			for flag, v := range map[string]string{"--session": cfg.Session.SessionID, "--socket": cfg.SocketPath, "--home": cfg.Home, "--cwd": cfg.Session.Cwd, "--transcript": cfg.TranscriptPath} {
				if v == "" {
					return usagef("worker needs %s", flag)
				}
			}
			if err := protocol.ValidSandbox("--sandbox", cfg.Session.Sandbox, "--network", cfg.Session.Network); err != nil {
				return usageError{err}
			}
			if err := protocol.ValidPluginDirs("--plugin", cfg.Session.Plugins); err != nil {
				return usageError{err}
			}
			logger, err := newLogger(e.stderr, logFormat, "info")
			if err != nil {
				return err
			}
			extra, err := toolEnvExtra()
			if err != nil {
				return err
			}
			if cfg.CompactAt, err = compactAtFromEnv(); err != nil {
				return usageError{err}
			}
			keys := newKeyring(cfg.Home)
			reg, err := providers(cfg.Home, keys, true)
			if err != nil {
				return err
			}
			defer reg.Close()
			cfg.Providers = models{reg: reg}
			cfg.ToolEnv = func() []string { return keys.toolEnv(extra) }
			cfg.Tools = tools.Builtin()
			if cfg.MCPStartTimeout, err = envDuration(EnvMCPStartTimeout); err != nil {
				return err
			}
			cfg.System = systemPrompt
			cfg.Logger = logger.With("role", "worker")
			cfg.Version = version.String()
			if readyFD > 0 {
				cfg.Ready = os.NewFile(uintptr(readyFD), "ready")
			}
			switch {
			case keysFile == nil:
				keys.hand(map[string]string{})
			case cfg.Ready == nil:
				receiveKeys(keys, keysFile, cfg.Logger)
			default:
				cfg.Ready = readyThenKeys{WriteCloser: cfg.Ready, keys: keysFile, ring: keys, logger: cfg.Logger}
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
	fl.StringVar(&cfg.Session.Sandbox, "sandbox", protocol.SandboxWorkspace, "what the session's commands may touch: read-only, workspace or full")
	fl.StringVar(&cfg.Session.Network, "network", protocol.NetworkOn, "whether the session's sandboxed commands may use the network: on or off")
	fl.StringArrayVar(&cfg.Session.Plugins, "plugin", nil, "the directory of one of the session's plugin packages (repeated: each)")
	fl.StringVar(&cfg.TranscriptPath, "transcript", "", "the session's transcript")
	fl.StringVar(&cfg.PreviousExit, "previous-exit", "", "why the session's previous worker exited")
	fl.DurationVar(&cfg.OrphanGrace, "orphan-grace", 0, "how long to live on with no host connected and no turn running (0: forever)")
	fl.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	fl.IntVar(&readyFD, "ready-fd", 0, "a file descriptor to write to once the worker serves")
	fl.IntVar(&keysFD, "keys-fd", 0, "a file descriptor to read the providers' keys from, as one JSON object, to its end, once the worker serves")
	return cmd
}
