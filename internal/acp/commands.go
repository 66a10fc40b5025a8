package acp

import (
	"context"
	"errors"
	"strings"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

// sendCommands sends the session's prompt commands, those of its plugin
// packages (session.commands), as an available_commands_update.
func (s *session) sendCommands() error {
	res, err := call(s.ctx, s.a, protocol.OpSessionCommands, protocol.SessionRef{SessionID: s.id})
	if err != nil {
		return err
	}
	return s.send(sdk.SessionUpdate{AvailableCommandsUpdate: &sdk.SessionAvailableCommandsUpdate{AvailableCommands: availableCommands(res.Commands)}})
}

// availableCommands is the session's prompt commands in ACP's terms: the
// argument hint, when a command has one, is its input's hint.
func availableCommands(cmds []protocol.PromptCommand) []sdk.AvailableCommand {
	out := make([]sdk.AvailableCommand, 0, len(cmds))
	for _, c := range cmds {
		ac := sdk.AvailableCommand{Name: c.Name, Description: c.Description}
		if ac.Description == "" {
			ac.Description = "a command of the " + c.Package + " package"
		}
		if c.ArgumentHint != "" {
			ac.Input = &sdk.AvailableCommandInput{Unstructured: &sdk.UnstructuredCommandInput{Hint: c.ArgumentHint}}
		}
		out = append(out, ac)
	}
	return out
}

// invocation splits a prompt typed as /name args into the command's name
// and its arguments; ok is false when the prompt is not one (a path such
// as /etc/hosts is not).
func invocation(text string) (name, args string, ok bool) {
	rest, ok := strings.CutPrefix(strings.TrimLeft(text, " \t"), "/")
	if !ok {
		return "", "", false
	}
	end := strings.IndexAny(rest, " \t\n")
	if end < 0 {
		end = len(rest)
	}
	name, args = rest[:end], strings.TrimSpace(rest[end:])
	valid := func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:", r)
	}
	if name == "" || strings.ContainsFunc(name, func(r rune) bool { return !valid(r) }) {
		return "", "", false
	}
	return name, args, true
}

// expand returns the prompt text is: a command of the session's plugin
// packages typed as /name args becomes its prompt
// (session.command.expand), as in agentd run; any other text, one naming
// no command included, is the prompt itself.
func (s *session) expand(ctx context.Context, text string) (string, error) {
	name, args, ok := invocation(text)
	if !ok {
		return text, nil
	}
	res, err := call(ctx, s.a, protocol.OpSessionCommandExpand, protocol.CommandExpandInput{SessionID: s.id, Name: name, Arguments: args})
	switch {
	case errors.Is(err, client.ErrNotFound):
		return text, nil
	case err != nil:
		return "", err
	}
	return res.Prompt, nil
}
