package memory_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/memory"
	"github.com/gamp-ml/gamp/tensor"
)

// Each test works on a logical CPU device of its own, so its counters are its own.

func TestStatsFollowAllocations(t *testing.T) {
	dev := tensor.CPUDevice(10)
	require.NoError(t, memory.EmptyCache(dev))
	a0, err := memory.Allocated(dev)
	require.NoError(t, err)
	st0, err := memory.Stats(dev)
	require.NoError(t, err)

	x := tensor.Zeros(tensor.Shape{1000}, tensor.WithDevice(dev)) // 4000 bytes
	a1, err := memory.Allocated(dev)
	require.NoError(t, err)
	require.Equal(t, a0+4000, a1)
	r1, err := memory.Reserved(dev)
	require.NoError(t, err)
	require.GreaterOrEqual(t, r1, a1, "reserved includes what is allocated")

	x.Release()
	a2, _ := memory.Allocated(dev)
	require.Equal(t, a0, a2)
	peak, _ := memory.MaxAllocated(dev)
	require.GreaterOrEqual(t, peak, a1)
	r2, _ := memory.Reserved(dev)
	require.Equal(t, r1, r2, "a freed block stays cached")

	require.NoError(t, memory.ResetPeak(dev))
	peak, _ = memory.MaxAllocated(dev)
	require.Equal(t, a0, peak)
	maxRes, _ := memory.MaxReserved(dev)
	require.Equal(t, r2, maxRes)

	require.NoError(t, memory.EmptyCache(dev))
	r3, _ := memory.Reserved(dev)
	require.Equal(t, a0, r3, "EmptyCache returns the cached block")

	st, err := memory.Stats(dev)
	require.NoError(t, err)
	require.Equal(t, st0.ByDType[tensor.Float32].NumAllocs+1, st.ByDType[tensor.Float32].NumAllocs)

	sum, err := memory.Summary(dev)
	require.NoError(t, err)
	for _, want := range []string{"device cpu:10", "Allocated memory", "Reserved memory", "float32"} {
		require.Contains(t, sum, want)
	}
}

func TestNoSuchDeviceIsAnError(t *testing.T) {
	for _, dev := range []tensor.Device{tensor.CPUDevice(1000), tensor.CUDA(0)} {
		_, err := memory.Stats(dev)
		require.ErrorIs(t, err, backend.ErrNoDevice, dev)
		_, err = memory.Allocated(dev)
		require.ErrorIs(t, err, backend.ErrNoDevice)
		_, err = memory.MaxAllocated(dev)
		require.ErrorIs(t, err, backend.ErrNoDevice)
		_, err = memory.Reserved(dev)
		require.ErrorIs(t, err, backend.ErrNoDevice)
		_, err = memory.MaxReserved(dev)
		require.ErrorIs(t, err, backend.ErrNoDevice)
		require.ErrorIs(t, memory.ResetPeak(dev), backend.ErrNoDevice)
		require.ErrorIs(t, memory.EmptyCache(dev), backend.ErrNoDevice)
		require.ErrorIs(t, memory.SetLimit(dev, 1<<20), backend.ErrNoDevice)
		_, err = memory.Summary(dev)
		require.ErrorIs(t, err, backend.ErrNoDevice)
	}
	require.Error(t, memory.SetLimit(tensor.CPUDevice(10), -1))
}

// The OOM error says how much memory the allocator held in its cache but could not
// use for the request (pytorch#29554): blocks of another size class. The allocator
// returns that cache and retries once by itself when that is enough (PyTorch's
// behaviour); when it is not, the error reports the cached bytes exactly, EmptyCache
// returns exactly them, and the request fits once the live tensor in the way is freed.
func TestOOMReportsFragmentation(t *testing.T) {
	dev := tensor.CPUDevice(11)
	require.NoError(t, memory.EmptyCache(dev))
	t.Cleanup(func() { _ = memory.SetLimit(dev, 0); _ = memory.EmptyCache(dev) })
	const kib = 1 << 10
	st0, _ := memory.Stats(dev)

	live := tensor.Zeros(tensor.Shape{64 * kib}, tensor.WithDevice(dev)) // 256 KiB
	defer live.Release()
	fragment := func() {
		// 64 blocks of 16 KiB, all of one size class, freed into the cache.
		ts := make([]*tensor.Tensor, 64)
		for i := range ts {
			ts[i] = tensor.Zeros(tensor.Shape{4 * kib}, tensor.WithDevice(dev))
		}
		for _, x := range ts {
			x.Release()
		}
	}
	fragment()
	st, _ := memory.Stats(dev)
	require.Equal(t, int64(256*kib), st.Allocated)
	require.Equal(t, int64(256*kib+1024*kib), st.Reserved, "1 MiB of 16 KiB blocks cached")
	require.NoError(t, memory.SetLimit(dev, 1536*kib))

	// 512 KiB: no cached block has its size; it fits only once the cache is returned.
	var big *tensor.Tensor
	require.NoError(t, tensor.CatchOOM(func() {
		big = tensor.Zeros(tensor.Shape{128 * kib}, tensor.WithDevice(dev))
	}))
	st, _ = memory.Stats(dev)
	require.Equal(t, st0.NumRetries+1, st.NumRetries, "the allocator emptied its cache and retried")
	require.Equal(t, int64(256*kib+512*kib), st.Reserved)
	big.Release()
	require.NoError(t, memory.EmptyCache(dev))

	// 1.375 MiB beside the live 256 KiB exceeds the 1.5 MiB cap whatever the cache holds.
	fragment()
	err := tensor.CatchOOM(func() { tensor.Zeros(tensor.Shape{352 * kib}, tensor.WithDevice(dev)) })
	require.ErrorIs(t, err, tensor.ErrOutOfMemory)
	var oe *backend.OOMError
	require.True(t, errors.As(err, &oe))
	require.Equal(t, dev, oe.Device)
	require.Equal(t, int64(1408*kib), oe.Requested)
	require.Equal(t, int64(256*kib), oe.Allocated)
	require.Equal(t, int64(1536*kib), oe.Limit)
	require.Equal(t, int64(1024*kib), oe.FreeCache, "the 16 KiB blocks are cached but unusable")
	require.Equal(t, oe.Allocated+oe.FreeCache, oe.Reserved, "reserved = in use + cached")
	require.Contains(t, err.Error(), "1.00 MiB cached but unusable for this request (fragmentation)")

	require.NoError(t, memory.EmptyCache(dev))
	r, _ := memory.Reserved(dev)
	require.Equal(t, oe.Reserved-oe.FreeCache, r, "EmptyCache returns exactly the reported bytes")
	live.Release()
	fragment() // even with the cache fragmented again, the retry fits now
	var got *tensor.Tensor
	require.NoError(t, tensor.CatchOOM(func() {
		got = tensor.Zeros(tensor.Shape{352 * kib}, tensor.WithDevice(dev))
	}))
	got.Release()
	st, _ = memory.Stats(dev)
	require.Equal(t, st0.NumOOMs+1, st.NumOOMs)
	require.Equal(t, st0.NumRetries+2, st.NumRetries)
}

func TestShowUtilization(t *testing.T) {
	dev := tensor.CPUDevice(12)
	require.NoError(t, memory.SetLimit(dev, 2<<20))
	t.Cleanup(func() { _ = memory.SetLimit(dev, 0) })
	x := tensor.Zeros(tensor.Shape{1 << 18}, tensor.WithDevice(dev)) // 1 MiB
	defer x.Release()

	var buf bytes.Buffer
	require.NoError(t, memory.ShowUtilization(&buf))
	out := buf.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Regexp(t, `^\| ID\s+\| UTIL \|\s+MEM \|\s+USED \|\s+TOTAL \|\s+ALLOCATED \|$`, lines[0])
	require.Contains(t, lines[2], "| process |")
	require.Regexp(t, `\| cpu:12\s+\|\s+- \|\s+50% \|\s+1\.00 MiB \|\s+2\.00 MiB \|\s+1\.00 MiB \|`, out)

	rows := memory.Utilization()
	require.Equal(t, "process", rows[0].ID)
	p := rows[0]
	require.Greater(t, p.Used, int64(0), "resident set from /proc/self/statm")
	require.Greater(t, p.Total, p.Used, "limit from the cgroup or /proc/meminfo")
	require.GreaterOrEqual(t, p.Busy, 0.0)
	require.LessOrEqual(t, p.Busy, 1.0)
	var seen bool
	for _, r := range rows[1:] {
		if r.ID == dev.String() {
			seen = true
			require.Equal(t, int64(1<<20), r.Allocated)
			require.InDelta(t, 0.5, r.MemFraction(), 1e-9)
		}
	}
	require.True(t, seen, "every opened device has a row")
}
