package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/agentd-dev/agentd/client"
	"github.com/agentd-dev/agentd/protocol"
)

// operandsAnnotation marks a command whose positional arguments went to the
// host as they were typed: when the host refuses one (invalid_request), the
// command line was wrong, and the command exits as for a usage error.
const operandsAnnotation = "agentd.operands"

// takesOperands records that cmd sends its positional arguments to the
// host. Argument validators call it.
func takesOperands(cmd *cobra.Command) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[operandsAnnotation] = "true"
}

// isUsage reports whether err, returned by cmd, is the command line's
// fault: a usage error, or the host refusing one of cmd's operands.
func isUsage(cmd *cobra.Command, err error) bool {
	var ue usageError
	if errors.As(err, &ue) {
		return true
	}
	return cmd != nil && cmd.Annotations[operandsAnnotation] == "true" && errors.Is(err, client.ErrInvalidRequest)
}

// codedError is a failure of the command itself that has a protocol error
// code, such as a session found on no host.
type codedError struct {
	code protocol.Code
	err  error
}

func (e codedError) Error() string { return e.err.Error() }
func (e codedError) Unwrap() error { return e.err }

// Codes of failures that are not the host's, in --json errors.
const (
	codeUsage  = "usage"
	codeFailed = "failed"
)

// errorCode is the code an error reports under --json: the host's error
// code, "usage" for a command line the user got wrong, or "failed".
func errorCode(err error, exit int) string {
	var re *client.RemoteError
	var ce codedError
	switch {
	case errors.As(err, &re):
		return string(re.Code)
	case errors.As(err, &ce):
		return string(ce.code)
	case exit == exitUsage:
		return codeUsage
	}
	return codeFailed
}

// archivedSession finds the session an archived-session message names.
// Like inputField it is compiled when an error is explained, not when a
// command starts.
var archivedSession = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`session (\S+) is archived`) })

// inputField finds the field of an operation's input that a host's message
// names, as protocol.FieldError writes it.
var inputField = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`field "input\.([^"]+)": `) })

// explain is the message of err for a person: what went wrong, with the
// input field the host names said as a word, and for an archived session
// how to bring it back.
func explain(err error) string {
	msg := inputField().ReplaceAllString(err.Error(), "the $1 ")
	if errors.Is(err, client.ErrSessionArchived) && !strings.Contains(msg, "unarchive") {
		id := "SESSION"
		if m := archivedSession().FindStringSubmatch(msg); m != nil {
			id = m[1]
		}
		msg += fmt.Sprintf("; `agentd unarchive %s` makes it active again", id)
	}
	return msg
}

// reportError writes err on w: a line for a person, or with --json one
// JSON object, {"error":{"code":…,"message":…}}.
func reportError(w io.Writer, err error, exit int, asJSON bool) {
	msg := explain(err)
	if !asJSON {
		fmt.Fprintf(w, "agentd: %s\n", msg)
		return
	}
	type body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	b, _ := json.Marshal(struct {
		Error body `json:"error"`
	}{body{errorCode(err, exit), msg}})
	fmt.Fprintf(w, "%s\n", b)
}

// wantsJSON reports whether the command line asked for --json, looking at
// the words themselves when the flags could not be parsed.
func wantsJSON(cmd *cobra.Command, args []string) bool {
	if cmd != nil {
		if f := cmd.Flags().Lookup("json"); f != nil && f.Changed {
			return f.Value.String() == "true"
		}
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--json" || a == "--json=true" {
			return true
		}
	}
	return false
}
