package cu

import (
	"fmt"
	"sync"
)

// NVMLDevice is an nvmlDevice_t. NVML numbers GPUs in PCI order and ignores
// CUDA_VISIBLE_DEVICES, so find a driver device's NVML handle by its PCI bus id
// (Device.PCIBusID), never by ordinal.
type NVMLDevice uintptr

var nvmlLib = library{spec: specNVML}

var nvml struct {
	init          func() int32
	errorString   func(rc int32) string
	byPCIBusID    func(busID string, d *NVMLDevice) int32
	utilization   func(d NVMLDevice, u *nvmlUtilization) int32
	memoryInfo    func(d NVMLDevice, m *nvmlMemory) int32
	name          func(d NVMLDevice, buf *byte, n uint32) int32
	driverVersion func(buf *byte, n uint32) int32
}

// nvmlUtilization is nvmlUtilization_t.
type nvmlUtilization struct{ gpu, memory uint32 }

// nvmlMemory is nvmlMemory_t.
type nvmlMemory struct{ total, free, used uint64 }

func loadNVML() error {
	return nvmlLib.open(func(l *library) error {
		return l.bindAll([]symbol{
			{fptr: &nvml.init, name: "nvmlInit_v2"},
			{fptr: &nvml.errorString, name: "nvmlErrorString"},
			{fptr: &nvml.byPCIBusID, name: "nvmlDeviceGetHandleByPciBusId_v2"},
			{fptr: &nvml.utilization, name: "nvmlDeviceGetUtilizationRates"},
			{fptr: &nvml.memoryInfo, name: "nvmlDeviceGetMemoryInfo"},
			{fptr: &nvml.name, name: "nvmlDeviceGetName"},
			{fptr: &nvml.driverVersion, name: "nvmlSystemGetDriverVersion", optional: true},
		})
	})
}

func nvmlCheck(fn string, rc int32) error {
	if rc == nvmlSuccess {
		return nil
	}
	e := &Error{Lib: libNVML, Func: fn, Code: int(rc), Name: codeName(nvmlReturnNames, "NVML_ERROR", int(rc))}
	if nvml.errorString != nil {
		e.Text = nvml.errorString(rc)
	}
	return e
}

var (
	nvmlOnce sync.Once
	nvmlErr  error
)

// NVMLInit loads libnvidia-ml and calls nvmlInit_v2, once per process; later calls
// return the first result. A missing library is an error wrapping ErrUnavailable.
func NVMLInit() error {
	nvmlOnce.Do(func() {
		if nvmlErr = loadNVML(); nvmlErr != nil {
			return
		}
		if err := nvmlCheck("nvmlInit_v2", nvml.init()); err != nil {
			nvmlErr = fmt.Errorf("%w: NVML (%s) did not start: %w", ErrUnavailable, nvmlLib.path, err)
			return
		}
		if nvml.driverVersion != nil {
			buf := make([]byte, 80) // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
			if nvml.driverVersion(&buf[0], uint32(len(buf))) == nvmlSuccess {
				nvmlLib.version = cBuf(buf)
			}
		}
	})
	return nvmlErr
}

// NVMLDeviceByPCIBusID returns the NVML device at a PCI address as Device.PCIBusID
// formats it ("0000:3B:00.0").
func NVMLDeviceByPCIBusID(busID string) (NVMLDevice, error) {
	if err := NVMLInit(); err != nil {
		return 0, err
	}
	var d NVMLDevice
	if err := nvmlCheck("nvmlDeviceGetHandleByPciBusId_v2", nvml.byPCIBusID(busID, &d)); err != nil {
		return 0, fmt.Errorf("PCI bus id %q: %w", busID, err)
	}
	return d, nil
}

// Utilization returns the percentage of the last sample period (1/6 s to 1 s) in which
// a kernel ran (gpu) and device memory was read or written (mem).
func (d NVMLDevice) Utilization() (gpu, mem uint32, err error) {
	if err := NVMLInit(); err != nil {
		return 0, 0, err
	}
	var u nvmlUtilization
	err = nvmlCheck("nvmlDeviceGetUtilizationRates", nvml.utilization(d, &u))
	return u.gpu, u.memory, err
}

// MemoryInfo returns the device's memory in bytes, for all processes.
func (d NVMLDevice) MemoryInfo() (total, free, used uint64, err error) {
	if err := NVMLInit(); err != nil {
		return 0, 0, 0, err
	}
	var m nvmlMemory
	err = nvmlCheck("nvmlDeviceGetMemoryInfo", nvml.memoryInfo(d, &m))
	return m.total, m.free, m.used, err
}

// Name returns the device's name.
func (d NVMLDevice) Name() (string, error) {
	if err := NVMLInit(); err != nil {
		return "", err
	}
	buf := make([]byte, 96) // NVML_DEVICE_NAME_V2_BUFFER_SIZE
	if err := nvmlCheck("nvmlDeviceGetName", nvml.name(d, &buf[0], uint32(len(buf)))); err != nil {
		return "", err
	}
	return cBuf(buf), nil
}
