package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/tui"
	"github.com/agentd-dev/agentd/protocol"
)

// compactTimeout bounds agentd compact: the model writes a summary.
const compactTimeout = 10 * time.Minute

func newCompactCmd(e *env) *cobra.Command {
	var asJSON bool
	var keep, threshold int
	cmd := &cobra.Command{
		Use:   "compact SESSION",
		Short: "Compact a session's context now: the model summarizes its older part, which the model is sent instead from then on.",
		Long: `Compact a session's context now: the session's model summarizes the older part of the
conversation, the summary is recorded in the transcript (the records it summarizes stay, and
agentd log shows both), and the model is sent the summary and the recent messages from then on.
A session compacts by itself before a request that would pass a share of the model's context
window: 80% unless the host's AGENTD_COMPACT_AT or the session's --threshold says otherwise.`,
		Args: exactArgs(1, "SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keep < 0 {
				return usagef("--keep must be 0 or more")
			}
			thresholdSet := cmd.Flags().Changed("threshold")
			ctx, cancel := context.WithTimeout(cmd.Context(), compactTimeout)
			defer cancel()
			l, err := locateSession(ctx, args[0])
			if err != nil {
				return err
			}
			defer l.conn.Close()
			if thresholdSet {
				res, err := client.Call(ctx, l.conn, protocol.OpSessionCompactionSet, protocol.CompactionSetInput{SessionID: l.session.SessionID, CompactAt: threshold})
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(e.stdout, res)
				}
				fmt.Fprintf(e.stdout, "session %s compacts before a request past %d%% of its model's %d-token window\n", res.SessionID, res.CompactAt, res.ContextWindow)
				return nil
			}
			res, err := client.Call(ctx, l.conn, protocol.OpSessionCompact, protocol.CompactInput{SessionID: l.session.SessionID, Keep: keep})
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(e.stdout, res)
			}
			fmt.Fprintf(e.stdout, "compacted %s (record %d)\n%s\n", res.SessionID, res.Sequence, tui.CompactionNote(res.Compaction))
			return nil
		},
	}
	cmd.Flags().IntVar(&keep, "keep", 0, "how many recent messages to keep as they are (0: as many as fit a quarter of the window)")
	cmd.Flags().IntVar(&threshold, "threshold", 0, fmt.Sprintf("instead of compacting now, set the share of the window, in percent (%d to %d; 0: the host's), past which the session compacts by itself", protocol.MinCompactAt, protocol.MaxCompactAt))
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

func newForkCmd(e *env) *cobra.Command {
	var asJSON bool
	var at uint64
	var title string
	cmd := &cobra.Command{
		Use:   "fork SESSION",
		Short: "Make a new session whose transcript is this one's up to a record (--at SEQ; all by default); the original is untouched.",
		Args:  exactArgs(1, "SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withSession(cmd, args[0], func(ctx context.Context, l located) error {
				in := protocol.ForkInput{SessionID: l.session.SessionID, Title: title}
				if cmd.Flags().Changed("at") {
					in.AtSequence = &at
				}
				s, err := client.Call(ctx, l.conn, protocol.OpSessionFork, in)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(e.stdout, s)
				}
				fmt.Fprintln(e.stdout, s.SessionID)
				return nil
			})
		},
	}
	cmd.Flags().Uint64Var(&at, "at", 0, "the last record to copy, by its sequence number (agentd log --json shows them)")
	cmd.Flags().StringVar(&title, "title", "", "the new session's title (default: the original's, marked as a branch)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the new session as JSON")
	return cmd
}

func newRewindCmd(e *env) *cobra.Command {
	var asJSON, files bool
	var turn, title string
	cmd := &cobra.Command{
		Use:   "rewind SESSION --to TURN",
		Short: "Start a new branch of a session from before a turn; --files puts back the files that turn and later ones wrote or edited.",
		Long: `Start a new branch of a session from before a turn: a new session whose transcript is the
original's up to that turn (the original is untouched). With --files, the files the agent's write
and edit tools changed in that turn and the later ones are put back as they were before it, and
files those turns created are removed; when any of them changed on disk since the agent wrote
it, nothing is put back and no session is made, and the files are listed. What shell commands
did is not undone.`,
		Args: exactArgs(1, "SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if turn == "" {
				return usagef("rewind needs --to TURN: the turn to go back to (agentd log --json shows turn ids)")
			}
			return withSession(cmd, args[0], func(ctx context.Context, l located) error {
				res, err := client.Call(ctx, l.conn, protocol.OpSessionRewind, protocol.RewindInput{SessionID: l.session.SessionID, TurnID: turn, Files: files, Title: title})
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(e.stdout, res)
				}
				for _, p := range res.Restored {
					fmt.Fprintf(e.stderr, "put back %s\n", p)
				}
				for _, p := range res.Removed {
					fmt.Fprintf(e.stderr, "removed %s\n", p)
				}
				fmt.Fprintln(e.stdout, res.Session.SessionID)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&turn, "to", "", "the turn to go back to: the new session starts before it")
	cmd.Flags().BoolVar(&files, "files", false, "put back the files the agent's write and edit tools changed in that turn and later")
	cmd.Flags().StringVar(&title, "title", "", "the new session's title (default: the original's, marked as a branch)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}
