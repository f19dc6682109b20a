package spawn

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel kill cmd's process when the thread
// that starts it (see spawner) exits, that is when the test binary does.
func setParentDeathSignal(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
