//go:build !linux

package testredis

import "os/exec"

// setParentDeathSignal does nothing outside Linux: a server outlives a test
// binary that dies without running its cleanups.
func setParentDeathSignal(*exec.Cmd) {}
