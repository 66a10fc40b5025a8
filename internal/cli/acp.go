//go:build !agentd_client

package cli

import (
	"context"
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
		Short: shortACP,
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
			in, out, restore := ownEnds(e.stdin, e.stdout)
			defer restore()
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
// or a write that blocks: a pipe or a socket, set non-blocking, is closed
// through the runtime's poller. restore sets them blocking again, as the
// editor that shares them expects. Anything else (a terminal, a file, a
// test's buffer) is used as it is.
func ownEnds(stdin io.Reader, stdout io.Writer) (io.ReadCloser, io.WriteCloser, func()) {
	var undo []func()
	restore := func() {
		for _, u := range undo {
			u()
		}
	}
	in, ok := pollable(stdin, &undo).(io.ReadCloser)
	if !ok {
		if rc, isCloser := stdin.(io.ReadCloser); isCloser {
			in = rc
		} else {
			in = io.NopCloser(stdin)
		}
	}
	out, ok := pollable(stdout, &undo).(io.WriteCloser)
	if !ok {
		if wc, isCloser := stdout.(io.WriteCloser); isCloser {
			out = wc
		} else {
			out = nopWriteCloser{stdout}
		}
	}
	return in, out, restore
}

// pollable returns a new file of a duplicate of f's descriptor set
// non-blocking when f is a pipe or a socket, adding to undo what sets it
// blocking again; nil otherwise.
func pollable(v any, undo *[]func()) any {
	f, ok := v.(*os.File)
	if !ok {
		return nil
	}
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return nil
	}
	if mode := st.Mode & unix.S_IFMT; mode != unix.S_IFIFO && mode != unix.S_IFSOCK {
		return nil
	}
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return nil
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil
	}
	orig := int(f.Fd())
	*undo = append(*undo, func() { unix.SetNonblock(orig, false) })
	return os.NewFile(uintptr(fd), f.Name())
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
