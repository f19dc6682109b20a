//go:build !linux

package spawn

import "os/exec"

// setParentDeathSignal does nothing outside Linux: a server outlives a test
// binary that dies without running its cleanups.
func setParentDeathSignal(*exec.Cmd) {}
