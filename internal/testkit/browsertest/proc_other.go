//go:build !linux

package browsertest

import "os/exec"

// ownGroup does nothing outside Linux.
func ownGroup(*exec.Cmd) {}

// killGroup kills the browser's main process only.
func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
