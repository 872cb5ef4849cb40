//go:build unix

package cuda

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A FIFO where a cache entry belongs is not read (the read would block forever): it is
// replaced by a fresh entry.
func TestKernelCacheFIFO(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "k.cubin")
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	compiles := 0
	err := cachedCompile(dir, "k", func() ([]byte, error) { compiles++; return []byte("IMG"), nil }, func([]byte) error { return nil })
	if err != nil || compiles != 1 {
		t.Fatalf("err %v, %d compiles", err, compiles)
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("cache entry after the call: %v %v", fi, err)
	}
}
