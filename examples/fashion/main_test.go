package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeIDX writes a small Fashion-MNIST-shaped data set whose label is readable from
// the image (class c lights up row band c), so a model can learn it in one epoch.
func writeIDX(t *testing.T, dir, prefix string, n int, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 1))
	var img, lab bytes.Buffer
	binary.Write(&img, binary.BigEndian, []uint32{0x803, uint32(n), 28, 28})
	binary.Write(&lab, binary.BigEndian, []uint32{0x801, uint32(n)})
	for i := 0; i < n; i++ {
		c := r.IntN(10)
		lab.WriteByte(byte(c))
		for p := 0; p < 784; p++ {
			v := byte(r.IntN(40))
			if (p/28)/3 == c {
				v = 200
			}
			img.WriteByte(v)
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, prefix+"-images-idx3-ubyte"), img.Bytes(), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, prefix+"-labels-idx1-ubyte"), lab.Bytes(), 0o644))
}

func TestMainJobEndToEnd(t *testing.T) {
	dir := t.TempDir()
	writeIDX(t, dir, "train", 512, 1)
	writeIDX(t, dir, "t10k", 256, 2)
	state := filepath.Join(dir, "state.safetensors")
	base := options{model: "mlp", precision: "fp16", epochs: 1, batch: 64, accum: 2, lr: 3e-3, seed: 1, dataDir: dir, quiet: true, save: state}
	s, err := run(base, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "mlp", s.Model)
	require.Equal(t, "O1", s.OptLevel)
	require.Equal(t, int64(8), s.Steps)
	require.Greater(t, float64(s.TestAccuracy), 0.5)
	require.Greater(t, s.PeakMemoryBytes, int64(0))
	require.Greater(t, float64(s.SamplesPerSecond), 0.0)
	require.Equal(t, jsonFloat(65536), s.FinalScale)

	// Resume from the saved epoch and train one more.
	more := base
	more.resume, more.epochs, more.save = state, 2, ""
	s2, err := run(more, io.Discard)
	require.NoError(t, err)
	require.Equal(t, int64(16), s2.Steps)

	cnn := base
	cnn.model, cnn.precision, cnn.save, cnn.accum, cnn.channels = "cnn", "bf16", "", 1, "4,8"
	s3, err := run(cnn, io.Discard)
	require.NoError(t, err)
	require.Equal(t, jsonFloat(1), s3.FinalScale, "bf16 runs unscaled")
}

func TestMainJobBadInput(t *testing.T) {
	dir := t.TempDir()
	ok := options{model: "mlp", precision: "fp32", epochs: 1, batch: 64, accum: 1, lr: 1e-3, dataDir: dir, quiet: true}
	_, err := run(ok, io.Discard)
	require.Error(t, err)
	require.Contains(t, err.Error(), "dataset-fashion-mnist", "missing data says how to get it")
	writeIDX(t, dir, "train", 64, 1)
	writeIDX(t, dir, "t10k", 64, 2)
	for name, mod := range map[string]func(o *options){
		"model":     func(o *options) { o.model = "resnet" },
		"precision": func(o *options) { o.precision = "fp8" },
		"level":     func(o *options) { o.optLevel = "O2" },
		"accum":     func(o *options) { o.accum = 3 },
		"lr":        func(o *options) { o.lr = -1 },
		"device":    func(o *options) { o.device = "tpu:0" },
		"resume":    func(o *options) { o.resume = filepath.Join(dir, "nope") },
		"channels":  func(o *options) { o.model, o.channels = "cnn", "32" },
	} {
		o := ok
		mod(&o)
		_, err := run(o, io.Discard)
		require.Error(t, err, name)
		require.False(t, strings.Contains(err.Error(), "panic"), name)
	}
}

func TestDDPFlagAlone(t *testing.T) {
	// -ddp without a launcher is a world of one: the same training as without it.
	for _, k := range []string{"OMPI_COMM_WORLD_SIZE", "WORLD_SIZE", "RANK", "GAMP_DIST_BACKEND"} {
		t.Setenv(k, "")
	}
	dir := t.TempDir()
	writeIDX(t, dir, "train", 256, 1)
	writeIDX(t, dir, "t10k", 64, 2)
	o := options{model: "mlp", precision: "fp16", epochs: 1, batch: 64, accum: 1, lr: 3e-3, seed: 1, dataDir: dir, quiet: true}
	plain, err := run(o, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 1, plain.WorldSize)
	o.ddp = true
	ddp, err := run(o, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 1, ddp.WorldSize)
	require.Equal(t, plain.FinalLoss, ddp.FinalLoss)
	require.Equal(t, plain.TestAccuracy, ddp.TestAccuracy)
}
