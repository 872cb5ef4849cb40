package tensor

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParseDevice: ParseDevice never panics, and a device it accepts prints as a name
// it parses back to the same device.
func FuzzParseDevice(f *testing.F) {
	for _, s := range []string{"cpu", "cpu:1", "cuda:0", "GPU:3", " cuda ", "cpu:x", "cuda:-1", "tpu:0", ":", "", "cuda:99999999999999999999", "cpu:+2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDevice(s)
		if err != nil {
			return
		}
		back, err := ParseDevice(d.String())
		require.NoError(t, err, "%q parsed as %v", s, d)
		require.Equal(t, d, back, "%q", s)
	})
}

// FuzzParseDType: ParseDType never panics, and a dtype it accepts prints as a name it
// parses back to the same dtype.
func FuzzParseDType(f *testing.F) {
	for _, s := range []string{"float32", "fp16", "BF16", "half", "double", "int", "long", "bool", "fp8", "", " f32 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		dt, err := ParseDType(s)
		if err != nil {
			return
		}
		back, err := ParseDType(dt.String())
		require.NoError(t, err, "%q parsed as %v", s, dt)
		require.Equal(t, dt, back, "%q", s)
	})
}

// A bad CPU index names the CPU, not cuda:0 (issue 16).
func TestParseDeviceBadIndexNamesTheKind(t *testing.T) {
	_, err := ParseDevice("cpu:x")
	require.Error(t, err)
	require.Contains(t, err.Error(), "bad cpu device index")
	require.Contains(t, err.Error(), "cpu:0")
	require.False(t, strings.Contains(err.Error(), "cuda"), err.Error())
	_, err = ParseDevice("cuda:-1")
	require.Contains(t, err.Error(), "cuda:0")
	_, err = ParseDevice("tpu:x")
	require.Contains(t, err.Error(), "unknown device")
}
