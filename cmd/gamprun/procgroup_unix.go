//go:build unix

package main

import (
	"os"
	"syscall"
)

// rankProcAttr makes each rank lead its own process group, so stopping it stops its
// children.
func rankProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// signalRank sends sig to the process group p leads.
func signalRank(p *os.Process, sig syscall.Signal) { _ = syscall.Kill(-p.Pid, sig) }
