package overflow

import (
	"os"
	"testing"
)

func TestExplore(t *testing.T) {
	if os.Getenv("EXPLORE") == "" {
		t.Skip()
	}
	all := syntheticImages(t, suiteTrain+suiteTest, 3)
	idx := make([]int, all.Len())
	for i := range idx {
		idx[i] = i
	}
	train, test := all.Subset(idx[:suiteTrain]), all.Subset(idx[suiteTrain:])
	r := runFashion(t, train, test, nil)
	t.Logf("acc %.4f skipped %v", r.accuracy, skippedSteps(r.results))
}
