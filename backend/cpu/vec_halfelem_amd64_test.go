//go:build amd64 && !purego

package cpu

// halfOpNESettings returns the values of vecHalfOpNE the tests can run: false (the
// integer bfloat16 rounding) always, true where the CPU has AVX512_BF16.
func halfOpNESettings() []bool {
	if vecHalfOpNE {
		return []bool{false, true}
	}
	return []bool{false}
}

// setHalfOpNE sets vecHalfOpNE for a test and returns what restores it.
func setHalfOpNE(ne bool) func() {
	old := vecHalfOpNE
	vecHalfOpNE = ne
	return func() { vecHalfOpNE = old }
}
