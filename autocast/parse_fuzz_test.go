package autocast

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParse: Parse never panics, and a policy it accepts is valid.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"params=float32,compute=float16,output=float32", "half", "bf16", "mixed_float16", "full",
		"params=float32,compute=int32", "compute=fp16,compute=bf16", "p=f32,c=bf16,o=f16", "=", ",", "", "params", "compute=float64"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse(s)
		if err != nil {
			require.Contains(t, err.Error(), "autocast: ")
			return
		}
		require.NoError(t, p.Validate(), "%q parsed as %+v", s, p)
	})
}
