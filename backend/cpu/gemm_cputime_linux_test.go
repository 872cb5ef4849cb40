//go:build linux

package cpu

import "syscall"

// gemmThreadCPU returns the CPU time the calling OS thread has used, in
// nanoseconds (RUSAGE_THREAD): a timing that other processes sharing the
// cores do not inflate, for single-worker benchmarks on a locked thread.
func gemmThreadCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1, &ru); err != nil { // RUSAGE_THREAD
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
