//go:build !amd64 || purego

package cpu

import "github.com/gamp-ml/gamp/half"

// packAMXATrans reports false: packAMXAGo packs everything here.
func packAMXATrans(dst []uint32, src []half.BFloat16, ld, kc, kc2, lanes int) bool { return false }

// packAMXARows reports false: packAMXAGo packs everything here.
func packAMXARows(dst []uint32, src []half.BFloat16, ld, kc, kc2, lanes int) bool { return false }

// packAMXATransPanels reports false: packA packs panel by panel here.
func packAMXATransPanels(dst []uint32, src []half.BFloat16, ld, kc, kc2, rows int) bool {
	return false
}
