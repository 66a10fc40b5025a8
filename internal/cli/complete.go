package cli

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/internal/activation"
	"github.com/agentd-dev/agentd/protocol"
)

// completeTimeout bounds what a completion asks the running host: a shell
// waiting on a Tab key must not wait long.
const completeTimeout = 2 * time.Second

// completer completes one argument or flag value from what the running
// host says, in one request.
type completer func(ctx context.Context, c *client.Conn, args []string, toComplete string) []cobra.Completion

// argCompleters are, by command path, the completers of each positional
// argument in turn.
var argCompleters = map[string][]completer{
	"agentd attach":    {sessionIDs},
	"agentd log":       {sessionIDs},
	"agentd rename":    {sessionIDs},
	"agentd archive":   {sessionIDs},
	"agentd unarchive": {sessionIDs},
	"agentd rm":        {sessionIDs},
	"agentd ps":        {sessionIDs},
	"agentd shell":     {sessionIDs},
	"agentd stop":      {sessionIDs, resourceRefs(func(r protocol.Resource) bool { return r.State == protocol.ResourceRunning })},
	"agentd pty": {sessionIDs, resourceRefs(func(r protocol.Resource) bool {
		return r.Kind == protocol.ResourcePTY && r.State == protocol.ResourceRunning
	})},
	"agentd logs":          {sessionIDs, resourceRefs(func(protocol.Resource) bool { return true })},
	"agentd answer":        {sessionIDs, pendingInteractions, words(protocol.AnswerAllow, protocol.AnswerDeny)},
	"agentd models select": {modelNames},
	"agentd auth set":      {providerNames},
	"agentd auth rm":       {providerNames},
}

// flagCompleters are, by command path and flag name, the completers of
// flag values.
var flagCompleters = map[string]map[string]completer{
	"agentd run":             {"session": sessionIDs, "model": modelNames},
	"agentd new":             {"model": modelNames},
	"agentd attach":          {"model": modelNames},
	"agentd models select":   {"session": sessionIDs},
	"agentd models thinking": {"session": sessionIDs},
}

// addCompletions gives the commands under root their completions of
// agentd's own: session ids (described by their titles and directories),
// resource refs, interactions, providers and models. They ask the host
// that runs, and never start one: with none running they offer nothing.
func addCompletions(root *cobra.Command) {
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		path := cmd.CommandPath()
		if cs, ok := argCompleters[path]; ok {
			cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				if len(args) >= len(cs) {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return fromHost(cmd, cs[len(args)], args, toComplete)
			}
		}
		for name, c := range flagCompleters[path] {
			cmd.RegisterFlagCompletionFunc(name, func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				return fromHost(cmd, c, args, toComplete)
			})
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for path, flags := range map[string]map[string][]string{
		"agentd run": {"approve": {protocol.ApprovalAsk, protocol.ApprovalAll, protocol.ApprovalReadOnly}, "thinking": thinkingLevels},
		"agentd new": {"approve": {protocol.ApprovalAsk, protocol.ApprovalAll, protocol.ApprovalReadOnly}},
	} {
		cmd, _, err := root.Find(strings.Fields(path)[1:])
		if err != nil {
			continue
		}
		for name, values := range flags {
			cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
		}
	}
	if cmd, _, err := root.Find([]string{"models", "thinking"}); err == nil {
		cmd.ValidArgsFunction = func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return thinkingLevels, cobra.ShellCompDirectiveNoFileComp
		}
	}
}

// thinkingLevels are the thinking levels a session may have.
var thinkingLevels = []string{"off", "low", "medium", "high"}

// fromHost runs c against this home's running host, if one runs.
func fromHost(cmd *cobra.Command, c completer, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	ctx, cancel := context.WithTimeout(cmd.Context(), completeTimeout)
	defer cancel()
	conn, _, _, err := activation.Open(ctx, activation.OpenOptions{NoStart: true, Options: client.Options{Surface: protocol.SurfaceCLI}})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer conn.Close()
	return c(ctx, conn, args, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// sessionIDs are the host's sessions whose id starts with toComplete,
// described by their titles and directories.
func sessionIDs(ctx context.Context, c *client.Conn, _ []string, toComplete string) []cobra.Completion {
	page, err := client.Call(ctx, c, protocol.OpSessionList, protocol.SessionListInput{Limit: protocol.MaxSessionPage})
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, s := range page.Sessions {
		if strings.HasPrefix(s.SessionID, toComplete) {
			out = append(out, cobra.CompletionWithDesc(s.SessionID, oneLine(sessionLabel(s))))
		}
	}
	return out
}

// resourceRefs completes the refs of the session named by the first
// argument that keep says to offer, described by their commands.
func resourceRefs(keep func(protocol.Resource) bool) completer {
	return func(ctx context.Context, c *client.Conn, args []string, toComplete string) []cobra.Completion {
		page, err := client.Call(ctx, c, protocol.OpRuntimeResourceQuery, protocol.ResourceQueryInput{SessionID: args[0]})
		if err != nil {
			return nil
		}
		var out []cobra.Completion
		for _, r := range page.Resources {
			if keep(r) && strings.HasPrefix(r.Ref, toComplete) {
				out = append(out, cobra.CompletionWithDesc(r.Ref, oneLine(r.Kind+" "+r.State+": "+r.Command)))
			}
		}
		return out
	}
}

// pendingInteractions completes the ids of the interactions that wait in
// the session named by the first argument, described by their prompts.
func pendingInteractions(ctx context.Context, c *client.Conn, args []string, toComplete string) []cobra.Completion {
	res, err := client.Call(ctx, c, protocol.OpInteractionQuery, protocol.SessionRef{SessionID: args[0]})
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, in := range res.Pending {
		if strings.HasPrefix(in.InteractionID, toComplete) {
			out = append(out, cobra.CompletionWithDesc(in.InteractionID, oneLine(in.Prompt)))
		}
	}
	return out
}

// words completes one of a fixed set of words; it asks the host nothing.
func words(ws ...string) completer {
	return func(context.Context, *client.Conn, []string, string) []cobra.Completion { return ws }
}

// modelNames completes provider/model, the default and those that cannot run
// described so.
func modelNames(ctx context.Context, c *client.Conn, _ []string, toComplete string) []cobra.Completion {
	res, err := client.Call(ctx, c, protocol.OpModelsList, protocol.ModelsListInput{})
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, m := range res.Models {
		name := m.Provider + "/" + m.ModelID
		if !strings.HasPrefix(name, toComplete) {
			continue
		}
		desc := ""
		switch {
		case m.Unavailable != "":
			desc = "cannot run: " + m.Unavailable
		case res.Default != nil && *res.Default == m:
			desc = "the default"
		}
		out = append(out, cobra.CompletionWithDesc(name, oneLine(desc)))
	}
	return out
}

// providerNames completes the host's model providers, described by whether
// they can be called.
func providerNames(ctx context.Context, c *client.Conn, _ []string, toComplete string) []cobra.Completion {
	res, err := client.Call(ctx, c, protocol.OpModelsList, protocol.ModelsListInput{})
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, p := range res.Providers {
		if !strings.HasPrefix(p.Name, toComplete) {
			continue
		}
		desc := "not configured"
		switch {
		case p.Configured && p.KeySource != "":
			desc = "key from the " + p.KeySource
		case p.Configured:
			desc = "configured"
		}
		out = append(out, cobra.CompletionWithDesc(p.Name, desc))
	}
	return out
}
