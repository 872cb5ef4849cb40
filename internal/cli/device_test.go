package cli

import (
	"errors"
	"testing"

	"github.com/gamp-ml/gamp/tensor"
)

func TestOpenDevice(t *testing.T) {
	d, err := OpenDevice("")
	if err != nil || d != tensor.BestDevice() {
		t.Fatalf(`OpenDevice("") = %v, %v; want the best device`, d, err)
	}
	for _, bad := range []string{"tpu:0", "cpu:x", "cpu:99"} {
		_, err := OpenDevice(bad)
		var u *UsageError
		if !errors.As(err, &u) {
			t.Errorf("OpenDevice(%q) = %v, want a usage error", bad, err)
		}
	}
	if got := AutoPrecision(tensor.CPU); got != "bf16" {
		t.Errorf("AutoPrecision(cpu) = %q", got)
	}
	if got := AutoPrecision(tensor.CUDA(0)); got != "fp16" {
		t.Errorf("AutoPrecision(cuda:0) = %q", got)
	}
}
