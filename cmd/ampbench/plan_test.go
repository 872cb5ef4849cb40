package main

import (
	"bytes"
	"io"
	"testing"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// TestPlanPrintsTheCandidates plans the MLP under a cap of its configuration's device:
// the report shows the measured steps, the candidates with and without checkpointing,
// and the chosen flags.
func TestPlanPrintsTheCandidates(t *testing.T) {
	b := backend.MustGet(tensor.CPUDevice(1))
	b.SetMemoryLimit(b.MemoryStats().Allocated + 64<<20)
	defer b.SetMemoryLimit(0)
	o := tiny("mlp", 512)
	o.precision, o.optLevel, o.plan = "bf16", "O3+16+16", true
	var out bytes.Buffer
	require.NoError(t, run(o, &out, io.Discard))
	s := out.String()
	t.Log("\n" + s)
	for _, want := range []string{"== bf16 O3+16+16 (batch 512) ==", "plan: budget", "measured: 0 checkpoint segments", "measured: 2 checkpoint segments", "→", "bf16 O3+16+16: -batch 512 -accum"} {
		require.Contains(t, s, want)
	}
}
