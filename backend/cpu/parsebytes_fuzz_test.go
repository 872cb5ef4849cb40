package cpu

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParseBytes: the GAMP_CPU_MEMORY_LIMIT parser never panics and never returns a
// negative size; a plain byte count it accepts is read exactly.
func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"1073741824", "512MiB", "2GiB", "1.5G", "64MB", "1KiB", " 3 k ", "NaN", "Inf", "-1", "1e300GiB", "9223372036854775807", "", "MiB", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseBytes(s)
		if err != nil {
			require.Contains(t, err.Error(), "bad memory size")
			return
		}
		require.GreaterOrEqual(t, n, int64(0), "%q", s)
	})
}

func TestParseBytesRefusesNonsense(t *testing.T) {
	for _, s := range []string{"NaN", "nanMiB", "Inf", "+InfGiB", "1e300GiB", "9223372036854775808"} {
		_, err := ParseBytes(s)
		require.Error(t, err, "%q", s)
	}
	n, err := ParseBytes("16MiB")
	require.NoError(t, err)
	require.Equal(t, int64(16<<20), n)
}
