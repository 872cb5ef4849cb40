//go:build !amd64 || purego

package cpu

// halfOpNESettings: no vector loops here, one setting.
func halfOpNESettings() []bool { return []bool{false} }

func setHalfOpNE(bool) func() { return func() {} }
