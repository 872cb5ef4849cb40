package main

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The masters variants of O3 side by side: bf16 weights with FP32 masters (2+4+4 bytes
// per parameter with SGD momentum), 16+16 split masters (2+2+4) and stochastic rounding
// or round to nearest without a master (2+4).
func TestMastersVariants(t *testing.T) {
	o := tiny("mlp", 16)
	o.precision, o.optLevel = "bf16", "O3,O3+16+16,O3+sr,O3+rn"
	_, rep := runJSON(t, o)
	require.Len(t, rep.Results, 4)
	names := []string{"O3", "O3+16+16", "O3+sr", "O3+rn"}
	for i, r := range rep.Results {
		assert.Equal(t, names[i], r.OptLevel)
	}
	o3, split, sr, rn := rep.Results[0].ParamOptimMemory, rep.Results[1].ParamOptimMemory, rep.Results[2].ParamOptimMemory, rep.Results[3].ParamOptimMemory
	assert.InDelta(t, 0.8, float64(split)/float64(o3), 0.01)
	assert.InDelta(t, 0.6, float64(sr)/float64(o3), 0.01)
	assert.Equal(t, sr, rn)
}

func TestMastersVariantsNeedBF16(t *testing.T) {
	// Stochastic rounding and round to nearest also keep float16 weights.
	o, err := parseArgs([]string{"-precision", "fp16", "-opt-level", "O3+sr,O3+rn"}, io.Discard)
	if err == nil {
		_, err = resolve(o)
	}
	assert.NoError(t, err)
	for _, args := range [][]string{
		{"-precision", "fp16", "-opt-level", "O3+16+16"},
		{"-precision", "bf16", "-opt-level", "O1+16+16"},
		{"-precision", "bf16", "-opt-level", "O3+sr,O3+sr"},
	} {
		o, err := parseArgs(args, io.Discard)
		if err == nil {
			_, err = resolve(o)
		}
		assert.Error(t, err, "%v", args)
	}
}
