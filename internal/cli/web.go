package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

func newWebCmd(e *env) *cobra.Command {
	var asJSON, off bool
	var in protocol.WebStartInput
	cmd := &cobra.Command{
		Use:   "web",
		Short: "Listen on the web: print the page's link, logging the owner in once.",
		Long: `Start the host's web listener, off until asked, and print where it listens.

It listens on a free port of 127.0.0.1 unless --listen names an address; an
address beyond loopback exposes the host to whoever reaches it and holds a
token. TLS is served with --tls-cert and --tls-key, or by a proxy in front.
It prints a link to the page with a new owner's login token: the page
exchanges it once for a cookie. Other clients connect a WebSocket and send
Authorization: Bearer TOKEN, as docs/protocol.md describes.

The listener is recorded in the home: after agentd upgrade, or a restart of
the host, it listens on the same address again and its logins hold, so an
open page reconnects by itself. --off stops it for good.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if off {
				if in != (protocol.WebStartInput{}) {
					return usageError{errors.New("--off: give no --listen, --tls-cert or --tls-key with it")}
				}
				res, err := callHost(cmd, protocol.OpHostWebStop, protocol.WebStopInput{})
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(e.stdout, res)
				}
				if res.Address == "" {
					fmt.Fprintln(e.stdout, "the host did not listen on the web; it will not until agentd web")
				} else {
					fmt.Fprintf(e.stdout, "stopped listening on %s; the host will not again until agentd web\n", res.Address)
				}
				return nil
			}
			l, err := callHost(cmd, protocol.OpHostWebStart, in)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(e.stdout, struct {
					URL          string `json:"url"`
					WebSocketURL string `json:"websocketUrl"`
					OwnerToken   string `json:"ownerToken"`
				}{l.URL, l.WebSocketURL, l.OwnerToken})
			}
			printWeb(e.stdout, l)
			return nil
		},
	}
	cmd.Flags().StringVar(&in.Listen, "listen", "", "listen on this host:port (default: a free port of 127.0.0.1)")
	cmd.Flags().StringVar(&in.CertFile, "tls-cert", "", "serve TLS with this PEM certificate (with --tls-key)")
	cmd.Flags().StringVar(&in.KeyFile, "tls-key", "", "the PEM key of --tls-cert")
	cmd.Flags().BoolVar(&off, "off", false, "stop listening on the web for good: no host listens again until agentd web")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"url": …, "websocketUrl": …, "ownerToken": …} ({"address": …} with --off)`)
	return cmd
}

func printWeb(w io.Writer, l protocol.WebListener) {
	fmt.Fprintf(w, "listening on %s\n", l.Address)
	fmt.Fprintf(w, "websocket   %s\n", l.WebSocketURL)
	if !l.Loopback {
		fmt.Fprintf(w, "\nthis listens beyond this machine: whoever reaches %s and holds a token reaches the host\n", l.Address)
	}
	fmt.Fprintf(w, "\nopen the page (the link logs in once, and replaces any before it not yet used):\n  %s#token=%s\n", l.URL, l.OwnerToken)
	fmt.Fprintf(w, "owner's login token, for other clients: %s\n", l.OwnerToken)
	fmt.Fprintf(w, "exchange it once for a session cookie: POST %slogin with Authorization: Bearer TOKEN\n", l.URL)
	fmt.Fprintf(w, "guests: agentd share SESSION prints a token for one session, sent as Authorization: Bearer TOKEN on %s\n", l.WebSocketURL)
}

func newShareCmd(e *env) *cobra.Command {
	var asJSON, control bool
	var expires time.Duration
	var label string
	cmd := &cobra.Command{
		Use:   "share SESSION",
		Short: "Give a guest one session to watch (or, with --control, to drive): print its token and link.",
		Args:  exactArgs(1, "SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if expires < 0 {
				return usageError{errors.New("--expires: must not be negative")}
			}
			in := protocol.GrantCreateInput{Level: protocol.GrantObserve, Label: label}
			if control {
				in.Level = protocol.GrantControl
			}
			if expires > 0 {
				at := time.Now().Add(expires).UTC().Truncate(time.Second)
				in.ExpiresAt = &at
			}
			return withSession(cmd, args[0], func(ctx context.Context, l located) error {
				in.SessionID = l.session.SessionID
				res, err := client.Call(ctx, l.conn, protocol.OpGrantCreate, in)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(e.stdout, struct {
						GrantID string `json:"grantId"`
						URL     string `json:"url"`
						Token   string `json:"token"`
					}{res.Grant.GrantID, res.URL, res.Token})
				}
				printShare(e.stdout, res)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&control, "control", false, "let the guest prompt, answer approvals, interrupt and type into PTYs, not only watch")
	cmd.Flags().DurationVar(&expires, "expires", 0, "end the grant after this long (default: until agentd share rm)")
	cmd.Flags().StringVar(&label, "label", "", "a note of whom the grant is for")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"grantId": …, "url": …, "token": …}`)
	cmd.AddCommand(newShareLsCmd(e), newShareRmCmd(e))
	return cmd
}

func printShare(w io.Writer, res protocol.GrantCreateResult) {
	g := res.Grant
	fmt.Fprintf(w, "grant %s: %s of session %s", g.GrantID, g.Level, g.SessionID)
	if g.ExpiresAt != nil {
		fmt.Fprintf(w, " until %s", g.ExpiresAt.Local().Format(time.DateTime))
	}
	fmt.Fprintf(w, "\ntoken, shown this once: %s\n", res.Token)
	if res.URL != "" {
		fmt.Fprintf(w, "link: %s\n", res.URL)
	} else {
		fmt.Fprintf(w, "the host does not listen on the web: agentd web starts it\n")
	}
	fmt.Fprintf(w, "revoke it with: agentd share rm %s\n", g.GrantID)
}

func newShareLsCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the grants in force with their last use.",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := callHost(cmd, protocol.OpGrantList, protocol.GrantListInput{})
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(e.stdout, res.Grants)
			}
			if len(res.Grants) == 0 {
				fmt.Fprintln(e.stdout, "no grants")
				return nil
			}
			tw := newTable(e.stdout)
			fmt.Fprintf(tw, "GRANT\tSESSION\tLEVEL\tLABEL\tEXPIRES\tLAST USE\n")
			for _, g := range res.Grants {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", g.GrantID, g.SessionID, g.Level, orDash(g.Label), when(g.ExpiresAt, "never"), when(g.LastUsedAt, "never"))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the grants as a JSON array")
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func when(t *time.Time, none string) string {
	if t == nil {
		return none
	}
	return t.Local().Format(time.DateTime)
}

func newShareRmCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "rm GRANT",
		Short: "Revoke a grant, at once: its guest's streams and PTY control end.",
		Args:  exactArgs(1, "GRANT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := callHost(cmd, protocol.OpGrantRevoke, protocol.GrantRef{GrantID: args[0]})
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(e.stdout, g)
			}
			fmt.Fprintf(e.stdout, "revoked %s\n", g.GrantID)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the revoked grant as JSON")
	return cmd
}
