package main

import (
	"errors"
	"io"
	"math"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// TestPlanTrainsUnderACap: under a memory cap at which the plain run fails, -plan
// picks a configuration that trains to completion, and the run's measured peak is
// within 10 % of the plan's prediction.
func TestPlanTrainsUnderACap(t *testing.T) {
	dir := t.TempDir()
	writeIDX(t, dir, "train", 1024, 1)
	writeIDX(t, dir, "t10k", 128, 2)
	o := options{model: "cnn", precision: "bf16", channels: "8,16", epochs: 1, batch: 512, accum: 1, lr: 2e-3, seed: 1, dataDir: dir, quiet: true, schedule: "cosine"}

	o.device = "cpu:61"
	plain, err := run(o, io.Discard)
	require.NoError(t, err)

	capped := tensor.CPUDevice(62)
	b := backend.MustGet(capped)
	b.SetMemoryLimit(plain.PeakActiveBytes * 6 / 10)
	defer b.SetMemoryLimit(0)
	o.device = "cpu:62"
	_, err = run(o, io.Discard)
	require.True(t, errors.Is(err, tensor.ErrOutOfMemory), "the plain run must not fit under the cap: %v", err)

	o.plan = true
	s, err := run(o, io.Discard)
	require.NoError(t, err)
	require.Equal(t, int64(2), s.Steps)
	require.Positive(t, s.PlannedPeakBytes)
	off := float64(s.PlannedPeakBytes)/float64(s.PeakActiveBytes) - 1
	t.Logf("plain peak %d; under a cap of %d the plan predicted %d and the run's blocks in use peaked at %d (%+.1f%%)", plain.PeakActiveBytes, plain.PeakActiveBytes*6/10, s.PlannedPeakBytes, s.PeakActiveBytes, 100*off)
	require.Less(t, math.Abs(off), 0.10)
}

func TestPlanWithDDPIsAUsageError(t *testing.T) {
	_, err := parseArgs([]string{"-plan", "-ddp"}, io.Discard)
	require.ErrorContains(t, err, "-plan")
}
