package main

import (
	"io"
	"testing"
)

// BenchmarkDefaultStep times training steps of the default model on the fortunes
// corpus in FP32 and under BF16 autocast, and reports the median step (ms/step) beside
// Go's figure, which also counts loading the corpus and one validation batch. For
// profiling: go test -bench DefaultStep -benchtime 10x -cpuprofile cpu.out.
func BenchmarkDefaultStep(b *testing.B) {
	for _, prec := range []string{"fp32", "bf16"} {
		b.Run(prec, func(b *testing.B) {
			o := defaultOptions()
			o.precision, o.quiet, o.sampleLen, o.evalEvery, o.evalBatches, o.warmup = prec, true, 0, 0, 1, 0
			o.steps = b.N
			o.device = "cpu"
			s, err := run(o, io.Discard)
			if err != nil {
				b.Skip(err)
			}
			b.ReportMetric(s.MedianStepMS, "ms/step")
		})
	}
}
