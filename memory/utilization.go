package memory

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gamp-ml/gamp/backend"
)

// UtilizationReporter is implemented by backends that can say how busy their device
// is and how much of its memory is in use (the CUDA backend, through NVML, as
// nvidia-smi and GPUtil do). ShowUtilization uses it when a backend has it and falls
// back to the allocator's statistics otherwise.
type UtilizationReporter interface {
	// Utilization returns the fraction of the last sample period the device was busy
	// (0–1; negative when unknown) and its memory in use and in total, in bytes.
	Utilization() (busy float64, memUsed, memTotal int64)
}

// Usage is one row of ShowUtilization.
type Usage struct {
	// ID is "process" for the whole process, else the device ("cpu", "cpu:9",
	// "cuda:0").
	ID string
	// Busy is the fraction of time busy (0–1), negative when not measured. For the
	// process it is CPU time over wall time and logical CPUs (see ShowUtilization).
	Busy float64
	// Used and Total are bytes: for the process, its resident set against the
	// cgroup memory limit or the machine's RAM; for an allocator device, Reserved
	// against the cap (Total 0: no cap); for a UtilizationReporter, what it reports.
	Used, Total int64
	// Allocated is the bytes in live tensors on the device; -1 for the process row.
	Allocated int64
}

// MemFraction is Used/Total, or -1 when Total is unknown or there is no cap.
func (u Usage) MemFraction() float64 {
	if u.Total <= 0 {
		return -1
	}
	return float64(u.Used) / float64(u.Total)
}

// Utilization measures the process and every opened device. The process's CPU use
// is measured since the previous call to Utilization or ShowUtilization (since the
// process started on the first call), from /proc/self/stat; on systems without /proc
// the process row reports Busy and Total as unknown.
func Utilization() []Usage {
	return append([]Usage{processUsage()}, deviceUsage(backend.Opened())...)
}

// deviceUsage is one row per backend, in device order.
func deviceUsage(bs []backend.Backend) []Usage {
	var rows []Usage
	sort.Slice(bs, func(i, j int) bool {
		a, b := bs[i].Device(), bs[j].Device()
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Index < b.Index
	})
	for _, b := range bs {
		s := b.MemoryStats()
		u := Usage{ID: b.Device().String(), Busy: -1, Used: s.Reserved, Total: s.Limit, Allocated: s.Allocated}
		if r, ok := b.(UtilizationReporter); ok {
			u.Busy, u.Used, u.Total = r.Utilization()
		}
		rows = append(rows, u)
	}
	return rows
}

// ShowUtilization prints a table of the process's and every opened device's load and
// memory, in the spirit of GPUtil's showUtilization:
//
//	| ID      | UTIL | MEM  |       USED |      TOTAL |  ALLOCATED |
//	|---------|------|------|------------|------------|------------|
//	| process |  97% |   2% | 310.45 MiB |  15.61 GiB |          - |
//	| cpu     |    - |    - |   4.00 MiB |     no cap |   3.50 MiB |
//	| cpu:9   |    - |  50% |   1.00 MiB |   2.00 MiB | 900.00 KiB |
//
// UTIL of the process row is its CPU time since the previous call divided by the
// wall time and the number of logical CPUs (100%: every core busy); devices without a
// UtilizationReporter (the CPU's logical devices) show "-". MEM is USED/TOTAL.
func ShowUtilization(w io.Writer) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "| %-7s | %4s | %4s | %10s | %10s | %10s |\n", "ID", "UTIL", "MEM", "USED", "TOTAL", "ALLOCATED")
	sb.WriteString("|---------|------|------|------------|------------|------------|\n")
	for _, u := range Utilization() {
		total := "no cap"
		if u.Total > 0 {
			total = backend.FormatBytes(u.Total)
		} else if u.ID == "process" {
			total = "unknown"
		}
		alloc := "-"
		if u.Allocated >= 0 {
			alloc = backend.FormatBytes(u.Allocated)
		}
		fmt.Fprintf(&sb, "| %-7s | %4s | %4s | %10s | %10s | %10s |\n",
			u.ID, percent(u.Busy), percent(u.MemFraction()), backend.FormatBytes(u.Used), total, alloc)
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

func percent(f float64) string {
	if f < 0 {
		return "-"
	}
	return strconv.Itoa(int(f*100+0.5)) + "%"
}

// clockTicks is USER_HZ, the unit of /proc/self/stat's CPU times: 100 on every Linux
// architecture Go supports (sysconf is out of reach without cgo).
const clockTicks = 100

var cpuMu sync.Mutex
var lastCPU struct {
	cpu  time.Duration // process CPU time (user + system)
	wall time.Time
	ok   bool
}

func processUsage() Usage {
	u := Usage{ID: "process", Busy: -1, Allocated: -1}
	if rss, ok := residentBytes(); ok {
		u.Used = rss
	}
	u.Total = memoryLimit()
	cpu, start, ok := processCPU()
	if !ok {
		return u
	}
	now := time.Now()
	cpuMu.Lock()
	defer cpuMu.Unlock()
	var dCPU time.Duration
	var dWall time.Duration
	if lastCPU.ok {
		dCPU, dWall = cpu-lastCPU.cpu, now.Sub(lastCPU.wall)
	} else if start > 0 {
		dCPU, dWall = cpu, start
	}
	lastCPU.cpu, lastCPU.wall, lastCPU.ok = cpu, now, true
	if dWall > 0 {
		u.Busy = min(1, max(0, dCPU.Seconds()/(dWall.Seconds()*float64(runtime.NumCPU()))))
	}
	return u
}

// processCPU returns the process's user+system CPU time and how long ago it started,
// from /proc/self/stat (fields 14, 15 and 22) and /proc/uptime.
func processCPU() (cpu, age time.Duration, ok bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces: split after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3
	if len(f) < 20 {
		return 0, 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	startTicks, err3 := strconv.ParseInt(f[19], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, false
	}
	cpu = time.Duration(utime+stime) * time.Second / clockTicks
	if up, err := os.ReadFile("/proc/uptime"); err == nil {
		if fs := strings.Fields(string(up)); len(fs) > 0 {
			if secs, err := strconv.ParseFloat(fs[0], 64); err == nil {
				age = time.Duration(secs*float64(time.Second)) - time.Duration(startTicks)*time.Second/clockTicks
			}
		}
	}
	return cpu, age, true
}

// residentBytes reads the resident set size from /proc/self/statm (field 2, pages).
func residentBytes() (int64, bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * int64(os.Getpagesize()), true
}

// memoryLimit is the memory the process may use: the cgroup limit (v2 memory.max,
// then v1 memory.limit_in_bytes) when one is set below the machine's RAM, else the
// RAM (MemTotal in /proc/meminfo); 0 when neither is known.
func memoryLimit() int64 {
	total := memTotal()
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || v <= 0 { // "max": no limit
			continue
		}
		if total == 0 || v < total {
			return v
		}
	}
	return total
}

func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			fs := strings.Fields(rest)
			if len(fs) == 0 {
				return 0
			}
			kb, err := strconv.ParseInt(fs[0], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
