package dist

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/internal/dl"
	"github.com/gamp-ml/gamp/internal/testenv"
	"github.com/gamp-ml/gamp/tensor"
)

func TestReadEnv(t *testing.T) {
	clear := func() {
		for _, k := range []string{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"} {
			t.Setenv(k, "")
		}
	}
	clear()
	e, err := ReadEnv()
	require.NoError(t, err)
	require.Equal(t, Env{Size: 1, MasterAddr: "127.0.0.1", MasterPort: 29500}, e)

	t.Setenv("RANK", "1")
	t.Setenv("WORLD_SIZE", "4")
	t.Setenv("LOCAL_RANK", "1")
	t.Setenv("MASTER_ADDR", "node1")
	t.Setenv("MASTER_PORT", "1234")
	e, err = ReadEnv()
	require.NoError(t, err)
	require.Equal(t, Env{Rank: 1, Size: 4, LocalRank: 1, MasterAddr: "node1", MasterPort: 1234}, e)

	// mpirun's variables win.
	t.Setenv("OMPI_COMM_WORLD_RANK", "2")
	t.Setenv("OMPI_COMM_WORLD_SIZE", "3")
	t.Setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0")
	e, err = ReadEnv()
	require.NoError(t, err)
	require.Equal(t, Env{Rank: 2, Size: 3, MasterAddr: "node1", MasterPort: 1234, MPI: true}, e)

	clear()
	for _, bad := range [][2]string{{"RANK", "x"}, {"WORLD_SIZE", "0"}, {"RANK", "5"}, {"MASTER_PORT", "p"}} {
		t.Setenv(bad[0], bad[1])
		_, err := ReadEnv()
		require.Error(t, err, "%v", bad)
		clear()
	}
}

func TestInitLocal(t *testing.T) {
	t.Setenv("OMPI_COMM_WORLD_SIZE", "")
	t.Setenv("WORLD_SIZE", "")
	t.Setenv("RANK", "")
	t.Setenv("GAMP_DIST_BACKEND", "")
	pg, err := Init()
	require.NoError(t, err)
	again, err := Init()
	require.NoError(t, err)
	require.Same(t, pg, again)
	require.Equal(t, "local", pg.Backend())
	require.Equal(t, 0, pg.Rank())
	require.Equal(t, 1, pg.Size())
	x := tensor.FromSlice([]float32{1, 2}, nil)
	require.NoError(t, pg.AllReduce(x, Avg))
	require.NoError(t, pg.AllReduceAsync(x, Max).Wait())
	require.NoError(t, pg.Broadcast(x, 0))
	require.Error(t, pg.Broadcast(x, 1))
	require.NoError(t, pg.Barrier())
	require.Equal(t, []float32{1, 2}, x.Float32s())
	require.Error(t, pg.AllReduce(tensor.FromSlice([]bool{true}, nil), Max))
	require.NoError(t, pg.Close())
	require.ErrorIs(t, pg.AllReduce(x, Sum), ErrClosed)

	// Several processes need a launcher.
	t.Setenv("WORLD_SIZE", "2")
	t.Setenv("RANK", "0")
	_, err = Init()
	require.ErrorContains(t, err, "gamprun -n 2")
	_, err = InitWith(Options{Backend: "gloo"})
	require.ErrorContains(t, err, "unknown backend")
}

func TestNCCLBinding(t *testing.T) {
	// The library is absent here: a clear error.
	t.Setenv("GAMP_NCCL_LIB", "/no/such/libnccl.so.2")
	_, err := openNCCL()
	require.ErrorIs(t, err, ErrNoNCCL)
	require.ErrorContains(t, err, "GAMP_NCCL_LIB")
	// The function signatures (the 128-byte id by value among them) are accepted by
	// purego; nothing is called.
	libc, err := dl.Open("libc.so.6")
	if err != nil {
		testenv.Skip(t, testenv.Libc, "no libc.so.6 to borrow a symbol address from: %v", err)
	}
	abs, err := dl.Sym(libc, "abs")
	require.NoError(t, err)
	l := &ncclLib{path: "fake"}
	require.NoError(t, l.bind(func(string) (uintptr, error) { return abs, nil }))
	require.ErrorContains(t, l.bind(func(name string) (uintptr, error) { return 0, fmt.Errorf("no %s", name) }), "ncclGetVersion")
}
