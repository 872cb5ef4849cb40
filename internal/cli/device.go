package cli

import (
	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/tensor"
)

// OpenDevice opens the device a -device flag names: the best one present for ""
// (a GPU when the CUDA backend is linked in and usable, else the CPU). A bad or
// absent device is a usage error.
func OpenDevice(name string) (tensor.Device, error) {
	d, err := tensor.OpenDevice(name)
	if err != nil {
		return d, Usagef("-device: %v", err)
	}
	return d, nil
}

// AutoPrecision is what -precision auto means on dev: fp16 on a GPU (tensor cores,
// with loss scaling), bf16 elsewhere (a CPU has no FP16 arithmetic).
func AutoPrecision(dev tensor.Device) string {
	if dev.Kind == backend.KindCUDA {
		return "fp16"
	}
	return "bf16"
}
