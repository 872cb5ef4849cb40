package cuda

import (
	"fmt"
	"strings"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/cuda/internal/cu"
)

// Utilization is what NVML reports for one device: the share of the last sample period
// in which a kernel ran (GPU) or device memory was read or written (Memory), in percent,
// and the device memory in use by every process (not just this one's allocator).
type Utilization struct {
	Device             backend.Device
	Name               string
	GPU, Memory        uint32 // percent
	Total, Free, Used  int64  // bytes, all processes
	Allocated, Reserve int64  // bytes, this process's allocator
}

// nvmlDevice maps a CUDA device to its NVML handle by PCI bus id (NVML numbers devices
// in PCI order and ignores CUDA_VISIBLE_DEVICES).
func (b *Backend) nvmlDevice() (cu.NVMLDevice, error) {
	if err := cu.NVMLInit(); err != nil {
		return cu.NVMLDevice(0), err
	}
	bus, err := b.d.cud.PCIBusID()
	if err != nil {
		return cu.NVMLDevice(0), err
	}
	return cu.NVMLDeviceByPCIBusID(bus)
}

// Utilization implements memory.UtilizationReporter (memory.ShowUtilization's rows):
// the GPU's busy fraction and the device memory in use and in total, from NVML; when
// NVML is missing, busy is -1 and the memory figures come from the driver.
func (b *Backend) Utilization() (busy float64, memUsed, memTotal int64) {
	u, err := b.DeviceUtilization()
	if err == nil {
		return float64(u.GPU) / 100, u.Used, u.Total
	}
	free, total, err := b.MemGetInfo()
	if err != nil {
		return -1, b.MemoryStats().Reserved, int64(b.d.total)
	}
	return -1, total - free, total
}

// DeviceUtilization reads the device's utilization and memory from NVML, with this
// process's allocator figures beside them.
func (b *Backend) DeviceUtilization() (Utilization, error) {
	u := Utilization{Device: b.d.bdev, Name: b.d.name}
	st := b.MemoryStats()
	u.Allocated, u.Reserve = st.Allocated, st.Reserved
	h, err := b.nvmlDevice()
	if err != nil {
		return u, fmt.Errorf("cuda:%d: NVML: %w", b.d.index, err)
	}
	if u.GPU, u.Memory, err = h.Utilization(); err != nil {
		return u, fmt.Errorf("cuda:%d: NVML utilization: %w", b.d.index, err)
	}
	total, free, used, err := h.MemoryInfo()
	if err != nil {
		return u, fmt.Errorf("cuda:%d: NVML memory info: %w", b.d.index, err)
	}
	u.Total, u.Free, u.Used = int64(total), int64(free), int64(used)
	return u, nil
}

// MemGetInfo returns the driver's free and total memory of the device
// (torch.cuda.mem_get_info).
func (b *Backend) MemGetInfo() (free, total int64, err error) {
	err = b.d.doErr(func() error {
		f, t, e := cu.MemGetInfo()
		free, total = int64(f), int64(t)
		return e
	})
	return free, total, err
}

// ShowUtilization returns a table of every CUDA device's utilization and memory, in the
// spirit of GPUtil.showUtilization(all=True). Without CUDA it says why.
func ShowUtilization() string {
	if !Available() {
		return fmt.Sprintf("no CUDA device: %v\n", Reason())
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "| %-6s | %-28s | %5s | %5s | %11s | %11s | %11s | %11s |\n", "ID", "Name", "GPU%", "Mem%", "Used", "Total", "Allocated", "Reserved")
	for i := 0; i < DeviceCount(); i++ {
		b, err := Open(i)
		if err != nil {
			fmt.Fprintf(&sb, "| cuda:%d | %v\n", i, err)
			continue
		}
		u, err := b.DeviceUtilization()
		if err != nil {
			fmt.Fprintf(&sb, "| %-6s | %-28s | %v\n", u.Device, u.Name, err)
			continue
		}
		fmt.Fprintf(&sb, "| %-6s | %-28s | %5d | %5d | %11s | %11s | %11s | %11s |\n", u.Device, u.Name, u.GPU, u.Memory,
			backend.FormatBytes(u.Used), backend.FormatBytes(u.Total), backend.FormatBytes(u.Allocated), backend.FormatBytes(u.Reserve))
	}
	return sb.String()
}
