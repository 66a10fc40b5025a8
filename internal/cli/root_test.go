package cli

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestEachCommandIsBuiltByTheEntryOfItsName(t *testing.T) {
	var names []string
	for _, c := range commands {
		if got := c.build(&env{}).Name(); got != c.name {
			t.Errorf("the entry %q builds the command %q", c.name, got)
		}
		names = append(names, c.name)
	}
	var tree []string
	for _, c := range newRoot(&env{}, "").Commands() {
		if n := c.Name(); n != "help" && n != "completion" {
			tree = append(tree, n)
		}
	}
	slices.Sort(names)
	slices.Sort(tree)
	if !slices.Equal(names, tree) {
		t.Errorf("the commands built for a word name %q; the whole tree has %q", names, tree)
	}
}

// A command built alone says and parses what it does in the whole tree.
func TestACommandBuiltAloneHasTheHelpItHasInTheWholeTree(t *testing.T) {
	help := func(word string, args ...string) (string, error) {
		var out bytes.Buffer
		root := newRoot(&env{stdout: &out, stderr: &out}, word)
		root.SetArgs(args)
		_, err := root.ExecuteC()
		return out.String(), err
	}
	for _, c := range commands {
		for _, args := range [][]string{{c.name, "--help"}, {"--host-model", "faux/echo", c.name, "-h"}} {
			alone, errAlone := help(c.name, args...)
			whole, errWhole := help("", args...)
			if alone != whole || errAlone != nil || errWhole != nil {
				t.Errorf("agentd %s built alone (%v):\n%s\nin the whole tree (%v):\n%s", strings.Join(args, " "), errAlone, alone, errWhole, whole)
			}
		}
		if sub := c.build(&env{}).Commands(); len(sub) > 0 {
			args := []string{c.name, sub[0].Name(), "--help"}
			alone, _ := help(c.name, args...)
			whole, _ := help("", args...)
			if alone != whole {
				t.Errorf("agentd %s built alone:\n%s\nin the whole tree:\n%s", strings.Join(args, " "), alone, whole)
			}
		}
	}
}

func TestTheCommandWordSkipsTheRootsFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"attach", "s-1"}, "attach"},
		{[]string{"--host-model", "faux/echo", "run", "hi"}, "run"},
		{[]string{"--host-model=faux/echo", "ls"}, "ls"},
		{[]string{"-h"}, ""},
		{[]string{"--", "ls"}, ""},
		{[]string{"help", "ls"}, "help"},
	} {
		if got := commandWord(c.args); got != c.want {
			t.Errorf("commandWord(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}
