package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/transcript"
	"github.com/agentd-dev/agentd/internal/tui"
	"github.com/agentd-dev/agentd/protocol"
)

func newLogCmd(e *env) *cobra.Command {
	var asJSON, following bool
	cmd := &cobra.Command{
		Use:   "log SESSION",
		Short: "Print a session's transcript (-f: then follow it live until interrupted).",
		Args:  exactArgs(1, "SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var last uint64
			var feed *tui.Feed
			var sess protocol.Session
			err := withSession(cmd, args[0], func(ctx context.Context, l located) error {
				sess = l.session
				contents, err := transcript.ReadAll(filepath.Join(l.home, "sessions", l.session.SessionID, "transcript.jsonl"))
				if errors.Is(err, fs.ErrNotExist) {
					return nil // no turn has run yet
				}
				if err != nil {
					return err
				}
				feed = tui.NewFeed(0)
				feed.OnChange = linesOf(e.stdout).Change
				for _, r := range contents.Records {
					last = r.Seq
					if asJSON {
						b, _ := json.Marshal(r)
						fmt.Fprintf(e.stdout, "%s\n", b)
						continue
					}
					feed.Record(protocol.TranscriptRecord{Seq: r.Seq, Time: r.Time, Type: r.Type, TurnID: r.TurnID, Data: r.Data})
				}
				if contents.Damaged != nil {
					fmt.Fprintf(e.stderr, "agentd: the transcript is damaged after record %d: %s\n", len(contents.Records), contents.Damaged)
				}
				return nil
			})
			if err != nil || !following {
				return err
			}
			if feed == nil {
				feed = tui.NewFeed(last)
				feed.OnChange = linesOf(e.stdout).Change
			}
			f, err := follow(cmd.Context(), sess.SessionID, nil, client.SessionOptions{Resume: true, After: last}, nil)
			if err != nil {
				return err
			}
			return followShown(cmd.Context(), e, f, feed, asJSON, jsonRecords)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw records as JSON lines")
	cmd.Flags().BoolVarP(&following, "follow", "f", false, "after the transcript, follow the session live until interrupted")
	return cmd
}

// linesOf returns the renderer of a session's events as lines to w,
// coloured when w is a terminal and NO_COLOR is unset.
func linesOf(w io.Writer) *tui.Lines {
	l := tui.NewLines(w)
	l.Color = paletteFor(w).on
	return l
}
