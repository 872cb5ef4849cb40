//go:build amd64 && !purego

package cpu

// vecExpArgsF64AVX512 equals vecExpArgsF64Go(e[:n], a[:n]) for n a multiple of 8, bit
// for bit: the instructions of vecExpF64AVX512's exponential (expCore in
// internal/vecgen) on eight float64 lanes at a time, four registers interleaved.
//
//go:noescape
func vecExpArgsF64AVX512(e, a *float64, n int)

func vecExpArgsF64Run(e, a *float64, n int) { vecExpArgsF64AVX512(e, a, n) }
