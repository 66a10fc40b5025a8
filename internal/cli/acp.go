package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/acp"
	"github.com/agentd-dev/agentd/internal/version"
	"github.com/agentd-dev/agentd/protocol"
)

func newACPCmd(e *env) *cobra.Command {
	var logLevel string
	cmd := &cobra.Command{
		Use:   "acp",
		Short: "Serve agentd's sessions to an editor over the Agent Client Protocol on stdin and stdout.",
		Long: `Serve agentd's sessions to an editor over the Agent Client Protocol (ACP)
on stdin and stdout: an editor (Zed, a JetBrains IDE, Neovim…) starts it as
its agent. Its sessions are agentd's: a turn started in the editor runs on
when the editor closes, and agentd attach, agentd answer or a second editor
see and drive the same session. Diagnostics go to stderr.

Zed's settings:

  "agent_servers": {"agentd": {"type": "custom", "command": "agentd", "args": ["acp"]}}`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			logger, err := newLogger(e.stderr, "text", logLevel)
			if err != nil {
				return err
			}
			in, out := ownEnds(e.stdin, e.stdout)
			dial := func(ctx context.Context) (*client.Conn, error) {
				c, _, err := openOwnAs(ctx, protocol.SurfaceACP)
				return c, err
			}
			return acp.Serve(cmd.Context(), acp.Config{Dial: dial, Version: version.String(), Logger: logger}, in, out)
		},
	}
	cmd.Flags().StringVar(&logLevel, "log-level", "warn", "the least level of diagnostics written to stderr: debug, info, warn or error")
	return cmd
}

// ownEnds returns stdin and stdout as ends Serve can close to end a read
// or a write that blocks: a pipe's file, set non-blocking, is closed
// through the runtime's poller. Other readers and writers (in a test) are
// closed when they can be, and otherwise left as they are.
func ownEnds(stdin io.Reader, stdout io.Writer) (io.ReadCloser, io.WriteCloser) {
	return pollable(stdin), pollableOut(stdout)
}

func pollable(r io.Reader) io.ReadCloser {
	if f, ok := r.(*os.File); ok {
		if g := reopen(f); g != nil {
			return g
		}
	}
	if rc, ok := r.(io.ReadCloser); ok {
		return rc
	}
	return io.NopCloser(r)
}

func pollableOut(w io.Writer) io.WriteCloser {
	if f, ok := w.(*os.File); ok {
		if g := reopen(f); g != nil {
			return g
		}
	}
	if wc, ok := w.(io.WriteCloser); ok {
		return wc
	}
	return nopWriteCloser{w}
}

// reopen returns a new file of a duplicate of f's descriptor set
// non-blocking, so that closing it ends a read or write in progress; nil
// when that cannot be done.
func reopen(f *os.File) *os.File {
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return nil
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil
	}
	return os.NewFile(uintptr(fd), fmt.Sprintf("%s (acp)", f.Name()))
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
