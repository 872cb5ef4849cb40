//go:build unix

package nn

import (
	"os"
	"syscall"
	"time"
)

// lockTemp takes the exclusive lock that marks f as a save in progress; it is released
// when f is closed or the process dies.
func lockTemp(f *os.File) { syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) }

// removeIfAbandoned removes path when no process holds its lock.
func removeIfAbandoned(path string, _ time.Time) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return // a save is writing it
	}
	os.Remove(path)
}
