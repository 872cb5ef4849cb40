//go:build unix

package main

import (
	"io"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestResumeFromAFIFOFailsInsteadOfHanging(t *testing.T) {
	dir := fashionData(t, 64)
	fifo := filepath.Join(t.TempDir(), "state.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := run(options{model: "mlp", precision: "fp32", epochs: 1, batch: 32, accum: 1, lr: 1e-3, dataDir: dir, quiet: true, resume: fifo}, io.Discard)
		done <- err
	}()
	select {
	case err := <-done:
		require.Error(t, err)
		require.Contains(t, err.Error(), "not a regular file")
	case <-time.After(60 * time.Second):
		t.Fatal("-resume on a FIFO hangs")
	}
}
