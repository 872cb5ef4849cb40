//go:build !linux && !purego

package cpu

// amxRequestPermission reports false outside Linux: gamp asks for the AMX tile
// data state only through Linux's arch_prctl, so other systems use the
// AVX-512 BF16 kernels.
func amxRequestPermission() bool { return false }
