package overflow

import (
	"os"
	"testing"

	"github.com/gamp-ml/gamp/data"
	"github.com/gamp-ml/gamp/tensor"
)

func TestExplore(t *testing.T) {
	if os.Getenv("EXPLORE") == "" {
		t.Skip()
	}
	all := data.Synthetic(suiteTrain+suiteTest, 10, tensor.Shape{1, 28, 28}, 3)
	idx := make([]int, all.Len())
	for i := range idx {
		idx[i] = i
	}
	train, test := all.Subset(idx[:suiteTrain]), all.Subset(idx[suiteTrain:])
	for _, lr := range []float64{3e-3, 1e-2} {
		suiteLRVar = lr
		r := runFashion(t, train, test, nil)
		t.Logf("lr %g acc %.4f skipped %v", lr, r.accuracy, skippedSteps(r.results))
	}
}
