package main

import (
	"io"
	"testing"
)

// BenchmarkDefaultStep times training steps of the default model (BF16 autocast) on
// the fortunes corpus, for profiling: go test -bench DefaultStep -cpuprofile cpu.out.
func BenchmarkDefaultStep(b *testing.B) {
	for _, prec := range []string{"fp32", "bf16"} {
		b.Run(prec, func(b *testing.B) {
			o := defaultOptions()
			o.precision, o.quiet, o.sampleLen, o.evalEvery, o.warmup = prec, true, 0, 0, 0
			o.steps = b.N
			o.device = "cpu"
			if _, err := run(o, io.Discard); err != nil {
				b.Skip(err)
			}
		})
	}
}
