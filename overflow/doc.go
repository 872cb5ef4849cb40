// Package overflow finds the op that overflows or underflows in a float16 run, and
// lets tests inject Inf and NaN to prove a skipped step corrupts nothing.
//
// A Watcher observes every op of a model, forward and backward, per module path, op
// and pass: the largest finite |x|, the Inf and NaN counts, and the fractions of values
// beyond float16's range (|x| > 65504), flushed by it (0 < |x| < 2^-24) or subnormal in
// it (2^-24 ≤ |x| < 2^-14). Its Report sorts the rows by risk and names the first op that
// produced a non-finite value:
//
//	w := overflow.Watch(model)
//	tr, _ := amp.NewTrainer(w.Model(), opt, loss, dev, amp.Config{Level: amp.O1, Low: tensor.Float16})
//	for range steps { r, _ := tr.Step(xs, ys); w.Record(r) }
//	rep := w.Report()       // rep.FirstNonFinite: module, op, pass, step
//	rep.Table(os.Stdout)
//
// Faults (InjectGrad, ScaleOutput, FlushSmallGrads) are armed for given steps of the
// Watcher; SnapshotTraining, AssertUnchanged, AssertScaleBackedOff and AssertRecovers
// turn "the scaler skipped the step and nothing was corrupted" into test assertions.
package overflow
