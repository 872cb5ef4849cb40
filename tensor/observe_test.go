package tensor

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type recorder struct {
	mu        sync.Mutex
	begins    []string
	forwards  []string
	backwards []string
	tags      []any
}

func (r *recorder) Begin(c *Context, op *Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.begins = append(r.begins, op.Name())
}

func (r *recorder) Forward(c *Context, op *Op, ins []*Tensor, out *Tensor) any {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forwards = append(r.forwards, op.Name())
	return len(r.forwards)
}

func (r *recorder) Backward(op *Op, tag any, g *Tensor, gin []*Tensor, took time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.backwards = append(r.backwards, op.Name())
	r.tags = append(r.tags, tag)
}

func TestObserverSeesForwardAndBackward(t *testing.T) {
	rec := &recorder{}
	c := NewContext(UseObserver(rec))
	defer c.Close()
	w := Randn(Shape{3, 4}).SetRequiresGrad(true)
	defer w.Release()
	x := Randn(Shape{2, 4}, WithContext(c))
	loss := Linear(x, w, nil).Relu().Sum()
	require.Equal(t, []string{"linear", "relu", "sum"}, rec.forwards)
	require.Equal(t, []string{"linear", "relu", "sum"}, rec.begins)
	loss.Backward()
	require.Equal(t, []string{"sum", "relu", "linear"}, rec.backwards)
	require.Equal(t, []any{3, 2, 1}, rec.tags, "each backward gets the tag its forward returned")

	// A Context without the observer reports nothing.
	other := NewContext()
	defer other.Close()
	Randn(Shape{2}, WithContext(other)).Exp()
	require.Len(t, rec.forwards, 3)
}
