package cli

import (
	"golang.org/x/term"
)

// fder is an *os.File, or anything else with a file descriptor.
type fder interface{ Fd() uintptr }

// isTerminal reports whether w is a terminal, and its width in columns (0
// if unknown).
func isTerminal(w any) (bool, int) {
	f, ok := w.(fder)
	if !ok {
		return false, 0
	}
	fd := int(f.Fd())
	if !term.IsTerminal(fd) {
		return false, 0
	}
	width, _, err := term.GetSize(fd)
	if err != nil {
		width = 0
	}
	return true, width
}
