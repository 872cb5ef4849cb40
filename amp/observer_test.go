package amp

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gamp-ml/gamp/optim"
	"github.com/gamp-ml/gamp/tensor"
	"github.com/stretchr/testify/require"
)

// opCounter is a tensor.Observer counting forwards and backwards by op name; it is a
// tensor.WidenDeferrer saying deferring.
type opCounter struct {
	mu                  sync.Mutex
	forwards, backwards map[string]int
	deferring           bool
}

func newOpCounter(deferring bool) *opCounter {
	return &opCounter{forwards: map[string]int{}, backwards: map[string]int{}, deferring: deferring}
}

func (o *opCounter) DeferWiden() bool { return o.deferring }

func (o *opCounter) Begin(*tensor.Context, *tensor.Op) {}

func (o *opCounter) Forward(_ *tensor.Context, op *tensor.Op, _ []*tensor.Tensor, _ *tensor.Tensor) any {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.forwards[op.Name()]++
	return nil
}

func (o *opCounter) Backward(op *tensor.Op, _ any, _ *tensor.Tensor, _ []*tensor.Tensor, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.backwards[op.Name()]++
}

// Config.Observer sees every micro-batch's forward and backward ops and Evaluate's
// forward ones, and observing changes no bit of the training, whether the observer
// lets the weight casts' gradients stay deferred (tensor.WidenDeferrer) or not.
func TestObserverSeesStepsAndChangesNothing(t *testing.T) {
	castBackwards := map[OptLevel]int{}
	for _, level := range []OptLevel{O0, O1} {
		for _, deferring := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/deferring=%v", level, deferring), func(t *testing.T) {
				mk := func(obs tensor.Observer) *Trainer {
					m := newMLP(7)
					Prepare(m, level, tensor.BFloat16)
					opt, err := optim.NewSGD(m.Params(), optim.SGDConfig{LR: 0.1, Momentum: 0.9})
					require.NoError(t, err)
					tr, err := NewTrainer(m, opt, ce, tensor.CPU, Config{Level: level, Low: tensor.BFloat16, Accum: 2, Observer: obs})
					require.NoError(t, err)
					tr.Gen.Seed(3)
					return tr
				}
				obs := newOpCounter(deferring)
				watched, plain := mk(obs), mk(nil)
				for s := range 3 {
					for _, tr := range []*Trainer{watched, plain} {
						x0, y0 := batch(2*s, 8)
						x1, y1 := batch(2*s+1, 8)
						_, err := tr.Step([]*tensor.Tensor{x0, x1}, []*tensor.Tensor{y0, y1})
						require.NoError(t, err)
						for _, u := range []*tensor.Tensor{x0, y0, x1, y1} {
							u.Release()
						}
					}
				}
				// Two linear layers, two micro-batches a step, three steps.
				require.Equal(t, 12, obs.forwards["linear"])
				require.Equal(t, 12, obs.backwards["linear"])
				require.Equal(t, 6, obs.forwards["cross_entropy"])
				require.Equal(t, paramBits(plain.Model), paramBits(watched.Model), "observing changed the training")

				x, _ := batch(9, 8)
				defer x.Release()
				out := watched.Evaluate(x)
				out.Release()
				require.Equal(t, 14, obs.forwards["linear"], "Evaluate's forward is observed")
				require.Equal(t, 12, obs.backwards["linear"])
				// The casts' backwards are reported whether their gradients are
				// deferred or widened at once.
				if prev, ok := castBackwards[level]; ok {
					require.Equal(t, prev, obs.backwards["cast"])
				}
				castBackwards[level] = obs.backwards["cast"]
				if level == O1 {
					require.Positive(t, obs.backwards["cast"])
				}
			})
		}
	}
}
