package chaos

import (
	"os/exec"
	"syscall"
)

// orphanProof makes the kernel SIGKILL the child when the harness dies, so
// that a crashed or interrupted run leaves no daemon or server behind.
func orphanProof(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
