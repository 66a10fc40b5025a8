package plugin

import (
	"strings"
)

// Expand returns the command's prompt for the arguments typed after its
// name, as Claude Code expands a command: $ARGUMENTS becomes the
// arguments as typed, $1 to $9 the first to ninth of them (split at
// spaces, a quoted argument kept whole, none past the last: empty), and
// ${CLAUDE_PLUGIN_ROOT} the package's directory. A body that names
// neither $ARGUMENTS nor a $N is given the arguments after it, on a line
// "ARGUMENTS: ...", so that none is lost.
func (c Command) Expand(args string) string {
	args = strings.TrimSpace(args)
	body := strings.ReplaceAll(c.Body, "${"+RootVariable+"}", c.root)
	fields := SplitArguments(args)
	var b strings.Builder
	used := false
	for i := 0; i < len(body); i++ {
		if body[i] != '$' {
			b.WriteByte(body[i])
			continue
		}
		rest := body[i+1:]
		switch {
		case strings.HasPrefix(rest, "ARGUMENTS"):
			b.WriteString(args)
			i += len("ARGUMENTS")
			used = true
		case len(rest) > 0 && rest[0] >= '1' && rest[0] <= '9' && (len(rest) == 1 || rest[1] < '0' || rest[1] > '9'):
			if n := int(rest[0] - '1'); n < len(fields) {
				b.WriteString(fields[n])
			}
			i++
			used = true
		default:
			b.WriteByte('$')
		}
	}
	out := b.String()
	if !used && args != "" {
		out = strings.TrimRight(out, "\n") + "\n\nARGUMENTS: " + args + "\n"
	}
	return out
}

// SplitArguments splits a command's arguments at runs of spaces; a part
// in double or single quotes is one argument, its quotes removed.
func SplitArguments(args string) []string {
	var out []string
	var cur strings.Builder
	in := false // inside an argument
	var q byte  // the open quote, or 0
	for i := 0; i < len(args); i++ {
		c := args[i]
		switch {
		case q != 0 && c == q:
			q = 0
		case q != 0:
			cur.WriteByte(c)
		case c == '"' || c == '\'':
			q, in = c, true
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// ParseInvocation splits a line typed as a command, "/name args", into
// the command's name and its arguments. ok is false when the line is not
// one: it does not start with '/', or what follows is not a name (a path
// such as "/etc/hosts" is not).
func ParseInvocation(line string) (name, args string, ok bool) {
	line = strings.TrimLeft(line, " \t")
	rest, ok := strings.CutPrefix(line, "/")
	if !ok {
		return "", "", false
	}
	name, args, _ = strings.Cut(rest, " ")
	if n, a, cut := strings.Cut(name, "\n"); cut {
		name, args = n, a+" "+args
	}
	if checkInvocationName(name) != nil {
		return "", "", false
	}
	return name, strings.TrimSpace(args), true
}

// checkInvocationName checks a typed command name: a command's name, or
// a package's name, ':' and a command's name.
func checkInvocationName(name string) error {
	pkg, cmd, qualified := strings.Cut(name, ":")
	if qualified {
		if err := checkName(pkg); err != nil {
			return err
		}
		return checkName(cmd)
	}
	return checkName(name)
}
