package plugin

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseFrontMatter: whatever a command or skill file holds, parsing
// never panics; an error is an *Error; a parse that succeeds keeps the
// body a suffix of the file and gives only keys that are words.
func FuzzParseFrontMatter(f *testing.F) {
	f.Add([]byte("---\ndescription: Review\nargument-hint: \"<file>\"\n---\nbody $1\n"))
	f.Add([]byte("---\nname: s\ndescription: >\n  folded\n  text\n---\n"))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("---"))
	f.Add([]byte("---\nx\n"))
	f.Add([]byte("no front matter"))
	f.Add([]byte("---\r\nk: 'it''s'\r\n---\r\nbody"))
	f.Add([]byte("---\n- a\n---\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fm, err := ParseFrontMatter(b)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not an *Error", err)
			}
			return
		}
		text := strings.ReplaceAll(string(b), "\r\n", "\n")
		if !strings.HasSuffix(text, fm.Body) {
			t.Fatalf("body %q is not the end of the file", fm.Body)
		}
		if !fm.Present && fm.Body != text {
			t.Fatalf("no front matter, yet the body is not the file")
		}
		for k := range fm.Fields {
			if k == "" || strings.ContainsAny(k, " \t\n\"'") {
				t.Fatalf("key %q", k)
			}
		}
	})
}

// FuzzDecodeManifest: whatever plugin.json holds, decoding never panics;
// an error names a field or the file as a whole; a manifest accepted has
// a name Load would accept and one-line texts.
func FuzzDecodeManifest(f *testing.F) {
	f.Add([]byte(`{"name":"kit","version":"1.0.0","description":"A kit"}`))
	f.Add([]byte(`{"name":"kit","author":{"name":"me"},"keywords":["a"]}`))
	f.Add([]byte(`{"name":null}`))
	f.Add([]byte(`{"name":"a b"}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"name":"kit","version":3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeManifest(b)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not an *Error", err)
			}
			switch pe.Field {
			case "", "name", "version", "description":
			default:
				t.Fatalf("field %q", pe.Field)
			}
			return
		}
		if checkName(m.Name) != nil {
			t.Fatalf("accepted name %q", m.Name)
		}
		for _, s := range []string{m.Version, m.Description} {
			if !utf8.ValidString(s) || strings.ContainsAny(s, "\n\r\x00") {
				t.Fatalf("accepted text %q", s)
			}
		}
	})
}

// FuzzExpand: expanding never panics, and the arguments as typed reach
// the prompt whenever the body names $ARGUMENTS.
func FuzzExpand(f *testing.F) {
	f.Add("Review $1 for $2: $ARGUMENTS", `a "b c"`)
	f.Add("$", "")
	f.Add("$9$10$ARGUMENT", "'")
	f.Fuzz(func(t *testing.T, body, args string) {
		out := Command{Body: body, root: "/r"}.Expand(args)
		if strings.Contains(body, "$ARGUMENTS") && !strings.Contains(out, strings.TrimSpace(args)) {
			t.Fatalf("Expand(%q) of %q = %q lacks the arguments", args, body, out)
		}
		SplitArguments(args)
		ParseInvocation(args)
	})
}
