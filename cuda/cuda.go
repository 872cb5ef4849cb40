package cuda

import (
	"fmt"
	"os"
	"sync"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/cuda/internal/cu"
)

// Importing this package registers the CUDA backend (as importing image/png registers
// a decoder): tensor.OpenDevice("cuda:0") and tensor.BestDevice reach it through
// backend.Get, which opens each device once and keeps it.
func init() {
	backend.Register(backend.KindCUDA, func(index int) (backend.Backend, error) {
		return open(index)
	})
}

// ErrUnavailable is wrapped by every error that says the CUDA backend cannot run here:
// no driver, no device, or a library that will not load. errors.Is(err,
// backend.ErrNoDevice) is true for these errors too, so code that asks for "the best
// device" falls back to the CPU.
var ErrUnavailable = cu.ErrUnavailable

var (
	probeOnce sync.Once
	probeErr  error
	numDev    int
)

func probe() {
	probeOnce.Do(func() {
		if v := os.Getenv("GAMP_DISABLE_CUDA"); v != "" && v != "0" {
			probeErr = fmt.Errorf("cuda: disabled by GAMP_DISABLE_CUDA=%s: %w", v, ErrUnavailable)
			return
		}
		if err := cu.Init(); err != nil {
			probeErr = err
			return
		}
		n, err := cu.DeviceCount()
		if err != nil {
			probeErr = fmt.Errorf("cuda: cannot count devices: %w: %w", err, ErrUnavailable)
			return
		}
		if n == 0 {
			probeErr = fmt.Errorf("cuda: the driver loaded but reports no device: %w", ErrUnavailable)
			return
		}
		numDev = n
	})
}

// Available reports whether the CUDA backend can run: the driver library loads, cuInit
// succeeds and at least one device is present. Reason says why not.
func Available() bool {
	probe()
	return probeErr == nil
}

// Reason returns nil when CUDA is available, else the error that explains why not
// (the libraries tried, the driver's error code). It wraps ErrUnavailable.
func Reason() error {
	probe()
	return probeErr
}

// DeviceCount returns the number of CUDA devices (0 without a driver).
func DeviceCount() int {
	probe()
	return numDev
}

// Open returns the backend for device index, starting its worker on first use. It is
// backend.Get(backend.CUDA(index)) with the concrete type, for code that needs the
// CUDA-only methods (streams, events, pinned memory).
func Open(index int) (*Backend, error) {
	b, err := backend.Get(backend.CUDA(index))
	if err != nil {
		return nil, err
	}
	return b.(*Backend), nil
}

// open starts device index; backend.Get calls it once per device and caches the result.
func open(index int) (*Backend, error) {
	probe()
	if probeErr != nil {
		return nil, fmt.Errorf("cuda:%d: %w: %w", index, backend.ErrNoDevice, probeErr)
	}
	if index < 0 || index >= numDev {
		return nil, fmt.Errorf("cuda:%d: %w (this machine has %d CUDA device(s): cuda:0 … cuda:%d)", index, backend.ErrNoDevice, numDev, numDev-1)
	}
	d, err := startDevice(index)
	if err != nil {
		return nil, err
	}
	return &Backend{d: d}, nil
}
