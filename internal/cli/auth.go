package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/internal/credentials"
	"github.com/agentd-dev/agentd/internal/tui"
	"github.com/agentd-dev/agentd/protocol"
)

func newAuthCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Store, list and remove the model providers' API keys.",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	set := &cobra.Command{
		Use:   "set PROVIDER",
		Short: "Store a provider's API key, read from standard input (a prompt without echo on a terminal).",
		Long: "Store a provider's API key in the home's credentials file (mode 0600). The key is read\n" +
			"from standard input, or asked for without echo on a terminal. A running host and its\n" +
			"sessions use it from their next turn, without a restart.",
		Example: "  agentd auth set anthropic\n  printf %s \"$OPENAI_API_KEY\" | agentd auth set openai",
		Args:    exactArgs(1, "PROVIDER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := keyProvider(args[0])
			if err != nil {
				return err
			}
			home, err := homeDir()
			if err != nil {
				return err
			}
			key, err := readAPIKey(cmd.Context(), e, name)
			if err != nil {
				return err
			}
			if err := credentials.Set(home, name, key); err != nil {
				if errors.Is(err, credentials.ErrBadKey) {
					return usagef("the %s key: %v", name, err)
				}
				return err
			}
			fmt.Fprintf(e.stdout, "stored the %s key; a running host uses it from the next turn\n", name)
			sayDefault(cmd, e.stdout, name)
			return nil
		},
	}
	rm := &cobra.Command{
		Use:   "rm PROVIDER",
		Short: "Remove a provider's stored API key.",
		Args:  exactArgs(1, "PROVIDER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := keyProvider(args[0])
			if err != nil {
				return err
			}
			home, err := homeDir()
			if err != nil {
				return err
			}
			had, err := credentials.Remove(home, name)
			if err != nil {
				return err
			}
			if !had {
				fmt.Fprintf(e.stdout, "no %s key was stored\n", name)
				return nil
			}
			fmt.Fprintf(e.stdout, "removed the stored %s key\n", name)
			return nil
		},
	}
	var asJSON bool
	ls := &cobra.Command{
		Use:   "ls",
		Short: "Show which providers the host can call, and where their keys come from.",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withHost(cmd, func(ctx context.Context, c *client.Conn) error {
				res, err := client.Call(ctx, c, protocol.OpModelsList, protocol.ModelsListInput{})
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(e.stdout, nonNil(res.Providers))
				}
				printProviders(e.stdout, res.Providers)
				return nil
			})
		},
	}
	ls.Flags().BoolVar(&asJSON, "json", false, "print the providers as JSON (never a key)")
	cmd.AddCommand(set, rm, ls)
	return cmd
}

// sayDefault tells, once a key of provider name is stored, that the
// default model of new sessions has not changed, which it is when a host
// runs to say it (none is started for it), and how to choose one of the
// provider's.
func sayDefault(cmd *cobra.Command, w io.Writer, name string) {
	def, model := "", name+"/MODEL"
	ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
	defer cancel()
	c, _, _, err := activation.Open(ctx, activation.OpenOptions{NoStart: true, Options: client.Options{Surface: protocol.SurfaceCLI}})
	if err == nil {
		defer c.Close()
		res, err := client.Call(ctx, c, protocol.OpModelsList, protocol.ModelsListInput{})
		if err == nil && res.Default != nil {
			def = res.Default.Provider + "/" + res.Default.ModelID
		}
		for _, m := range res.Models {
			if m.Provider == name {
				model = m.Provider + "/" + m.ModelID
				break
			}
		}
	}
	if def == "" {
		fmt.Fprintf(w, "the default model of new sessions is unchanged (`agentd models` marks it); `agentd models select %s` makes a %s model the default\n", model, name)
		return
	}
	fmt.Fprintf(w, "new sessions still start with %s, the default model: storing a key does not change it; `agentd models select %s` makes a %s model the default, and `--model` chooses one session's\n", def, model, name)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// printProviders prints one line per provider: whether it can be called,
// where its key comes from, and what to do when it cannot.
func printProviders(w io.Writer, ps []protocol.ProviderStatus) {
	tw := newTable(w)
	for _, p := range ps {
		state, from := "configured", p.KeySource
		switch {
		case !p.Configured:
			state, from = "not configured", "no key"
		case from == "" && p.KeyEnv == "":
			from = "needs no key"
		case from == "":
			from = "no key: a server at a base URL"
		case from == protocol.KeySourceEnvironment:
			from = "the host's environment (" + p.KeyEnv + ")"
		}
		note := ""
		if !p.Configured {
			note = "agentd auth set " + p.Name
			if p.KeyEnv != "" && os.Getenv(p.KeyEnv) != "" {
				note = p.KeyEnv + " is set here, not in the running host: agentd auth set " + p.Name + ", or agentd shutdown and run again"
			}
		}
		if note == "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Name, state, from)
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, state, from, note)
		}
	}
	tw.Flush()
}

// providersLine says in one line which providers can be called, with
// where their keys come from, and which cannot.
func providersLine(ps []protocol.ProviderStatus) string {
	var on, off []string
	for _, p := range ps {
		switch {
		case !p.Configured:
			off = append(off, p.Name)
		case p.KeySource != "":
			on = append(on, p.Name+" (key from the "+p.KeySource+")")
		case p.KeyEnv != "":
			on = append(on, p.Name+" (a server at a base URL)")
		default:
			on = append(on, p.Name)
		}
	}
	line := strings.Join(on, ", ")
	if len(off) > 0 {
		line += "; not configured: " + strings.Join(off, ", ") + " (agentd auth set PROVIDER)"
	}
	return line
}

// keyProvider checks that name is a provider that takes an API key.
func keyProvider(name string) (string, error) {
	if _, ok := keyEnvs[name]; ok {
		return name, nil
	}
	return "", usagef("%q is not a provider that takes a key: want one of %s", name, strings.Join(slices.Sorted(maps.Keys(keyEnvs)), ", "))
}

// homeDir is the home this command's host keeps.
func homeDir() (string, error) {
	act, err := activation.Resolve(activation.Options{})
	if err != nil {
		return "", err
	}
	return act.Home, nil
}

// readAPIKey reads a key: asked for without echo when standard input is a
// terminal, else the whole of standard input, trimmed.
func readAPIKey(ctx context.Context, e *env, name string) (string, error) {
	if f, ok := e.stdin.(*os.File); ok && tui.IsTerminal(f) {
		key, err := readNoEcho(ctx, f, func() { fmt.Fprintf(e.stderr, "%s API key (not shown): ", name) })
		fmt.Fprintln(e.stderr)
		if err != nil {
			return "", err
		}
		return checkRead(name, key)
	}
	b, err := io.ReadAll(io.LimitReader(e.stdin, credentials.MaxKeyBytes+2))
	if err != nil {
		return "", fmt.Errorf("reading the key: %w", err)
	}
	return checkRead(name, string(b))
}

func checkRead(name, key string) (string, error) {
	key = strings.TrimSpace(key)
	if key == "" {
		return "", usagef("no %s key on standard input: pipe it in, or run on a terminal to be asked for it", name)
	}
	if err := credentials.CheckKey(key); err != nil {
		return "", usagef("the %s key: %v", name, err)
	}
	return key, nil
}

// readNoEcho turns the terminal f's echo off, asks with prompt, and reads
// one line, restoring the terminal's settings however it ends. Ctrl-C
// gives up.
func readNoEcho(ctx context.Context, f *os.File, prompt func()) (string, error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return "", fmt.Errorf("reading the key: %w", err)
	}
	quiet := *old
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ICANON | unix.ISIG
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &quiet); err != nil {
		return "", fmt.Errorf("reading the key: %w", err)
	}
	defer unix.IoctlSetTermios(fd, unix.TCSETS, old)
	prompt() // only now: a key typed at once is not echoed
	type line struct {
		s   string
		err error
	}
	got := make(chan line, 1)
	// The read cannot be cancelled; on Ctrl-C the command returns and the
	// process exits with the read still blocked.
	go func() {
		s, err := bufio.NewReader(f).ReadString('\n')
		if errors.Is(err, io.EOF) && s != "" {
			err = nil
		}
		got <- line{s, err}
	}()
	select {
	case l := <-got:
		if l.err != nil {
			return "", fmt.Errorf("reading the key: %w", l.err)
		}
		return l.s, nil
	case <-ctx.Done():
		return "", errors.New("interrupted: no key stored")
	}
}
