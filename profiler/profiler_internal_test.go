package profiler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/tensor"
)

// Every op reports Begin and Forward (ArgMax and comparisons included), and per-Context
// state stays bounded when every step has a Context of its own.
func TestEveryOpRecordedAndStateBounded(t *testing.T) {
	p := New()
	for range 200 {
		ctx := p.Context()
		x := tensor.Randn(tensor.Shape{4, 3}, tensor.WithContext(ctx))
		x.Relu().ArgMax(1)
		tensor.Eq(x, x)
		ctx.Close()
	}
	p.mu.Lock()
	states := len(p.states)
	p.mu.Unlock()
	require.LessOrEqual(t, states, maxStates)
	recs := p.Records()
	count := map[string]int{}
	for _, r := range recs {
		count[r.Op]++
		require.Equal(t, 0, r.Lane)
	}
	require.Equal(t, map[string]int{"relu": 200, "argmax": 200, "compare": 200}, count)
}

// countingClock is a Clock that holds one resource per stamp, as DeviceClock holds a
// device event, and counts those not yet released.
type countingClock struct {
	CPUClock
	live   map[Stamp]bool
	next   Stamp
	closed bool
}

func (c *countingClock) Mark(tensor.Device) Stamp {
	c.next++
	c.live[c.next] = true
	return c.next
}

func (c *countingClock) Release(s Stamp) { delete(c.live, s) }

func (c *countingClock) Close() { c.closed = true }

// The profiler hands back every stamp it drops: marks taken while stopped, Begins that
// never got their Forward, and every record on Reset; Close closes only a clock it made.
func TestStampsReleased(t *testing.T) {
	clk := &countingClock{live: map[Stamp]bool{}}
	p := New(WithClock(clk))
	ctx := p.Context()
	x := tensor.Randn(tensor.Shape{4, 3}, tensor.WithContext(ctx), tensor.WithGrad())
	x.Relu().Sum().Backward()
	require.NotEmpty(t, clk.live)
	n := len(clk.live)
	// Two stamps per record (start, end).
	require.LessOrEqual(t, n, 2*len(p.Records()))
	p.Stop()
	x.Relu().Exp()
	require.Len(t, clk.live, n, "marks taken while stopped are released")
	p.Start()
	// A Begin whose op never reports its Forward, under one that does.
	relu := x.Relu()
	expOp, ok1 := tensor.LookupOp("exp")
	reluOp, ok2 := tensor.LookupOp("relu")
	require.True(t, ok1 && ok2)
	p.Begin(ctx, expOp)
	p.Begin(ctx, reluOp)
	p.Forward(ctx, expOp, []*tensor.Tensor{relu}, relu)
	p.Reset()
	require.Empty(t, clk.live, "Reset releases every record's stamps and the orphaned Begin")
	p.Close()
	require.False(t, clk.closed, "a clock given WithClock is its owner's to close")

	q := New()
	dc := q.clock.(*DeviceClock)
	q.Close()
	require.Equal(t, 0, dc.Live())
	ctx.Close()
}

// msClock is a countingClock whose stamps resolve to whole milliseconds: a stand-in for
// a device clock, whose times the host's durations know nothing of.
type msClock struct{ countingClock }

func (c *msClock) Resolve(s Stamp) time.Duration { return time.Duration(s) * time.Millisecond }

// A backward record spans the clock's marks at StartBackward and Backward, so on a
// device clock it is the node's device time, not the host time spent queueing its
// kernels (Backward's took): here each node's backward is exactly one tick.
func TestBackwardTimedByTheClock(t *testing.T) {
	clk := &msClock{countingClock{live: map[Stamp]bool{}}}
	p := New(WithClock(clk))
	ctx := p.Context()
	defer ctx.Close()
	x := tensor.Randn(tensor.Shape{64, 32}, tensor.WithContext(ctx), tensor.WithGrad())
	x.Relu().Exp().Sum().Backward()
	var bwd int
	for _, r := range p.Records() {
		if r.Pass != Backward {
			continue
		}
		bwd++
		require.Equal(t, time.Millisecond, r.Dur, "%s backward", r.Op)
		require.Equal(t, time.Duration(0), r.Start%time.Millisecond, "%s backward starts on a tick", r.Op)
	}
	require.Equal(t, 3, bwd)
	p.Reset()
	require.Empty(t, clk.live)
}
