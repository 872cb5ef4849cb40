package memory

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/backend"
)

// gpu stands in for a CUDA backend that reports its load (from NVML, later).
type gpu struct {
	backend.Backend
	dev backend.Device
}

func (g gpu) Device() backend.Device { return g.dev }
func (gpu) Utilization() (busy float64, used, total int64) {
	return 0.87, 6 << 30, 8 << 30
}

func TestUtilizationReporterIsUsed(t *testing.T) {
	cpu1, err := backend.Get(backend.Device{Kind: backend.KindCPU, Index: 13})
	require.NoError(t, err)
	rows := deviceUsage([]backend.Backend{gpu{cpu1, backend.CUDA(1)}, cpu1, gpu{cpu1, backend.CUDA(0)}})
	require.Len(t, rows, 3)
	require.Equal(t, []string{"cpu:13", "cuda:0", "cuda:1"}, []string{rows[0].ID, rows[1].ID, rows[2].ID})
	require.Equal(t, -1.0, rows[0].Busy, "the CPU's logical devices do not measure load")
	require.Equal(t, 0.87, rows[1].Busy)
	require.Equal(t, int64(6<<30), rows[1].Used)
	require.Equal(t, 0.75, rows[1].MemFraction())
}
