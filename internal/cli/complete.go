package cli

import (
	"context"
	"fmt"
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

// completer completes one argument or flag value: from fixed words, or
// from what the running host says, in one request.
type completer struct {
	words []string
	ask   func(ctx context.Context, c *client.Conn, args []string, toComplete string) []cobra.Completion
}

// Completers of agentd's own values.
var (
	completeSessions    = completer{ask: sessionIDsOf}
	completeModels      = completer{ask: modelNamesOf}
	completeProviders   = completer{ask: providersOf}
	completePending     = completer{ask: pendingOf}
	completeGrants      = completer{ask: grantsOf}
	completeApprovals   = completer{words: []string{protocol.ApprovalAsk, protocol.ApprovalAll, protocol.ApprovalReadOnly}}
	completeThinking    = completer{words: []string{"off", "low", "medium", "high"}}
	completeAnswers     = completer{words: []string{protocol.AnswerAllow, protocol.AnswerDeny}}
	completeRefs        = resourceRefs(func(protocol.Resource) bool { return true })
	completeRunningRefs = resourceRefs(func(r protocol.Resource) bool { return r.State == protocol.ResourceRunning })
	completeRunningPTYs = resourceRefs(func(r protocol.Resource) bool {
		return r.Kind == protocol.ResourcePTY && r.State == protocol.ResourceRunning
	})
)

// argCompleters returns, by command (its words after agentd), the
// completers of each positional argument in turn. (Functions, not maps
// built as the package initialises: only a completion reads them.)
func argCompleters() map[string][]completer {
	return map[string][]completer{
		"attach":          {completeSessions},
		"log":             {completeSessions},
		"plugins":         {completeSessions},
		"rename":          {completeSessions},
		"archive":         {completeSessions},
		"unarchive":       {completeSessions},
		"rm":              {completeSessions},
		"compact":         {completeSessions},
		"fork":            {completeSessions},
		"rewind":          {completeSessions},
		"ps":              {completeSessions},
		"shell":           {completeSessions},
		"stop":            {completeSessions, completeRunningRefs},
		"pty":             {completeSessions, completeRunningPTYs},
		"logs":            {completeSessions, completeRefs},
		"answer":          {completeSessions, completePending, completeAnswers},
		"models select":   {completeModels},
		"models thinking": {completeThinking},
		"auth set":        {completeProviders},
		"auth rm":         {completeProviders},
		"share":           {completeSessions},
		"share rm":        {completeGrants},
	}
}

// flagCompleters returns, by command and flag name, the completers of flag
// values.
func flagCompleters() map[string]map[string]completer {
	return map[string]map[string]completer{
		"run":             {"session": completeSessions, "model": completeModels, "approve": completeApprovals, "thinking": completeThinking},
		"new":             {"model": completeModels, "approve": completeApprovals},
		"attach":          {"model": completeModels},
		"models select":   {"session": completeSessions},
		"models thinking": {"session": completeSessions},
	}
}

// addCompletions gives agentd's commands their completions of agentd's
// own: session ids (described by their titles and directories), resource
// refs, interactions, completeProviders and models. Those ask the host that
// runs, and never start one: with none running they offer nothing.
func addCompletions(root *cobra.Command) {
	find := func(path string) *cobra.Command {
		cmd, _, err := root.Find(strings.Fields(path))
		if err != nil || cmd == root {
			panic(fmt.Sprintf("completions for %q, which is no command", path))
		}
		return cmd
	}
	for path, cs := range argCompleters() {
		find(path).ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) >= len(cs) {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return cs[len(args)].complete(cmd, args, toComplete), cobra.ShellCompDirectiveNoFileComp
		}
	}
	for path, flags := range flagCompleters() {
		cmd := find(path)
		for name, c := range flags {
			cmd.RegisterFlagCompletionFunc(name, func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				return c.complete(cmd, args, toComplete), cobra.ShellCompDirectiveNoFileComp
			})
		}
	}
}

// complete returns c's completions of toComplete: its words, or what it
// asks this home's running host, if one runs.
func (c completer) complete(cmd *cobra.Command, args []string, toComplete string) []cobra.Completion {
	if c.ask == nil {
		return c.words
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completeTimeout)
	defer cancel()
	conn, _, _, err := activation.Open(ctx, activation.OpenOptions{NoStart: true, Options: client.Options{Surface: protocol.SurfaceCLI}})
	if err != nil {
		return nil
	}
	defer conn.Close()
	return c.ask(ctx, conn, args, toComplete)
}

// sessionIDsOf are the host's sessions whose id starts with toComplete,
// described by their titles and directories.
func sessionIDsOf(ctx context.Context, c *client.Conn, _ []string, toComplete string) []cobra.Completion {
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

// grantsOf are the host's grants in force whose id starts with
// toComplete, described by their session, level and label.
func grantsOf(ctx context.Context, c *client.Conn, _ []string, toComplete string) []cobra.Completion {
	res, err := client.Call(ctx, c, protocol.OpGrantList, protocol.GrantListInput{})
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, g := range res.Grants {
		if strings.HasPrefix(g.GrantID, toComplete) {
			out = append(out, cobra.CompletionWithDesc(g.GrantID, oneLine(strings.TrimSpace(g.Level+" of "+g.SessionID+" "+g.Label))))
		}
	}
	return out
}

// resourceRefs completes the refs of the session named by the first
// argument that keep says to offer, described by their commands.
func resourceRefs(keep func(protocol.Resource) bool) completer {
	return completer{ask: func(ctx context.Context, c *client.Conn, args []string, toComplete string) []cobra.Completion {
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
	}}
}

// pendingOf completes the ids of the interactions that wait in
// the session named by the first argument, described by their prompts.
func pendingOf(ctx context.Context, c *client.Conn, args []string, toComplete string) []cobra.Completion {
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

// modelNamesOf completes provider/model, the default and those that cannot run
// described so.
func modelNamesOf(ctx context.Context, c *client.Conn, _ []string, toComplete string) []cobra.Completion {
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

// providersOf completes the host's model completeProviders, described by whether
// they can be called.
func providersOf(ctx context.Context, c *client.Conn, _ []string, toComplete string) []cobra.Completion {
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
