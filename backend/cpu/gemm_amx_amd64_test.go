//go:build amd64 && !purego

package cpu

import (
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestAMXDetected checks the run-time choice against the kernel's view of
// the CPU: where /proc/cpuinfo lists amx_tile and amx_bf16 (Linux only
// lists what the kernel enabled) and x/sys/cpu reports AVX-512 and both AMX
// features (GODEBUG=cpu.amxbf16=off clears one), GemmBF16 must run the AMX
// kernel — a failed permission request would otherwise fall back silently
// to a kernel a dozen times slower.
func TestAMXDetected(t *testing.T) {
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skip("no /proc/cpuinfo")
	}
	var flags []string
	for line := range strings.Lines(string(info)) {
		if name, val, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "flags" {
			flags = strings.Fields(val)
			break
		}
	}
	has := func(f string) bool { return slices.Contains(flags, f) }
	want := has("amx_tile") && has("amx_bf16") && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BF16 && cpu.X86.HasAMXTile && cpu.X86.HasAMXBF16
	if amxUsable != want {
		t.Fatalf("amxUsable = %v, want %v (cpuinfo amx_tile=%v amx_bf16=%v; x/sys/cpu AVX512F=%v AVX512BF16=%v AMXTile=%v AMXBF16=%v)",
			amxUsable, want, has("amx_tile"), has("amx_bf16"), cpu.X86.HasAVX512F, cpu.X86.HasAVX512BF16, cpu.X86.HasAMXTile, cpu.X86.HasAMXBF16)
	}
	if want && gemmBF16KernelBest != gemmAMXKernel {
		t.Fatalf("GemmBF16 runs %s, want the AMX kernel", gemmBF16KernelBest.name)
	}
	t.Logf("AMX: %v; GemmBF16 kernel %s", amxUsable, gemmBF16KernelBest.name)
}
