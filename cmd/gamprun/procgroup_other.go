//go:build !unix

package main

import (
	"os"
	"syscall"
)

// rankProcAttr is the default: without Unix process groups a rank is one process.
func rankProcAttr() *syscall.SysProcAttr { return nil }

// signalRank stops the rank: the OS has no signals to forward, so any stop kills it.
func signalRank(p *os.Process, _ syscall.Signal) { _ = p.Kill() }
