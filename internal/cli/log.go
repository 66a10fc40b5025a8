package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentd-dev/agentd/internal/llm"
	"github.com/agentd-dev/agentd/internal/transcript"
)

func newLogCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "log SESSION",
		Short: "Print a session's transcript.",
		Args:  exactArgs(1, "SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withSession(cmd, args[0], func(ctx context.Context, l located) error {
				contents, err := transcript.ReadAll(filepath.Join(l.home, "sessions", l.session.SessionID, "transcript.jsonl"))
				if errors.Is(err, fs.ErrNotExist) {
					return nil // no turn has run yet
				}
				if err != nil {
					return err
				}
				for _, r := range contents.Records {
					if asJSON {
						b, _ := json.Marshal(r)
						fmt.Fprintf(e.stdout, "%s\n", b)
						continue
					}
					printRecord(e, r)
				}
				if contents.Damaged != nil {
					fmt.Fprintf(e.stderr, "agentd: the transcript is damaged after record %d: %s\n", len(contents.Records), contents.Damaged)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the raw records as JSON lines")
	return cmd
}

func printRecord(e *env, r transcript.Record) {
	switch r.Type {
	case "turn_start":
		fmt.Fprintf(e.stdout, "── turn %s · %s\n", r.TurnID, r.Time.Local().Format("2006-01-02 15:04:05"))
	case "user_message":
		var d struct{ Text string }
		json.Unmarshal(r.Data, &d)
		fmt.Fprintf(e.stdout, "> %s\n", strings.ReplaceAll(d.Text, "\n", "\n> "))
	case "assistant_message", "tool_results":
		var m llm.Message
		json.Unmarshal(r.Data, &m)
		for _, p := range m.Parts {
			switch {
			case p.Type == llm.PartText && p.Text != "":
				fmt.Fprintln(e.stdout, strings.TrimRight(p.Text, "\n"))
			case p.ToolCall != nil:
				fmt.Fprintf(e.stdout, "→ %s %s\n", p.ToolCall.Name, p.ToolCall.Arguments)
			case p.ToolResult != nil:
				out := strings.TrimRight(p.ToolResult.Content, "\n")
				for _, l := range strings.Split(out, "\n") {
					fmt.Fprintf(e.stdout, "  │ %s\n", l)
				}
			}
		}
	case "turn_end":
		var d struct{ Status, Error string }
		json.Unmarshal(r.Data, &d)
		if d.Error != "" {
			fmt.Fprintf(e.stdout, "── %s: %s\n", d.Status, d.Error)
		} else {
			fmt.Fprintf(e.stdout, "── %s\n", d.Status)
		}
	}
}
