// Package startenv keeps tmux's variable from the package initialisers of
// the libraries agentd links, and gives it back once they have run.
//
// lipgloss detects the terminal's colours when its package initialises
// (its Writer), and when standard output is a terminal inside tmux that
// detection runs `tmux info`: a process started by every agentd command a
// person types in a tmux pane, about 2.6 ms of a 4.7 ms start here, for a
// colour profile no command reads. With TMUX hidden, the detection reads
// the environment and terminfo alone.
//
// This package has to initialise before lipgloss. Go initialises, of the
// packages whose imports are done, the first by import path; this one
// imports only os, so it is ready once os is, and its path sorts before
// os/exec, which the colour detection (github.com/charmbracelet/colorprofile,
// and lipgloss after it) cannot initialise without. TestTheStartRunsNoTmux
// in internal/cli holds it.
package startenv

import "os"

const tmuxVar = "TMUX"

var tmux, hidden = os.LookupEnv(tmuxVar)

func init() {
	if hidden {
		os.Unsetenv(tmuxVar)
	}
}

// Restore gives TMUX back, for the processes agentd starts and for the
// terminal UI, which asks tmux about colours when it draws. Call it once
// the libraries have initialised: from an initialiser of a package that
// imports them, or later.
func Restore() {
	if hidden {
		os.Setenv(tmuxVar, tmux)
		hidden = false
	}
}
