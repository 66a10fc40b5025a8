// Package startenv keeps the terminal's variables, TERM and TMUX, from
// the package initialisers of the libraries agentd links, and gives them
// back once they have run.
//
// lipgloss detects the terminal's colours when its package initialises
// (its Writer), for a colour profile no command reads. When standard
// output is a terminal that detection reads the terminfo entry of TERM
// (and /etc/passwd, to find the user's own terminfo directory): about 30
// page faults of every agentd command a person types. Inside tmux it also
// runs `tmux info`: a process, about 2.6 ms of a 4.7 ms start here. With
// both variables hidden the detection reads the environment alone and
// finds no terminal type.
//
// This package has to initialise before lipgloss. Go initialises, of the
// packages whose imports are done, the first by import path; this one
// imports only os, so it is ready once os is, and its path sorts before
// os/exec, which the colour detection (github.com/charmbracelet/colorprofile,
// and lipgloss after it) cannot initialise without. TestTheStartRunsNoTmux
// and TestTheStartReadsNoTerminfo in internal/cli hold it.
package startenv

import "os"

// hidden are the variables this package took from the environment, with
// their values.
var hidden = take("TERM", "TMUX")

func take(names ...string) map[string]string {
	var took map[string]string
	for _, name := range names {
		if v, ok := os.LookupEnv(name); ok {
			if took == nil {
				took = make(map[string]string, len(names))
			}
			took[name] = v
			os.Unsetenv(name)
		}
	}
	return took
}

// Restore gives TERM and TMUX back, for the commands, the processes agentd
// starts and the terminal UI, which detects the terminal's colours when it
// draws. Call it once the libraries have initialised: from an initialiser
// of a package that imports them, or later.
func Restore() {
	for name, v := range hidden {
		os.Setenv(name, v)
	}
	hidden = nil
}
