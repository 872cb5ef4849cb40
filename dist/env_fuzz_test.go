package dist

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzReadEnv: ReadEnv never panics, and an Env it accepts is usable: a rank inside
// the world, a local rank inside it too, and a TCP port.
func FuzzReadEnv(f *testing.F) {
	f.Add("0", "1", "0", "127.0.0.1", "29500", false)
	f.Add("1", "2", "1", "10.0.0.1", "1234", false)
	f.Add("3", "2", "0", "", "", false)
	f.Add("-1", "4", "0", "", "", true)
	f.Add("0", "0", "0", "", "", false)
	f.Add(" 2 ", "4", "-3", "", "-5", false)
	f.Add("x", "", "", "", "99999", true)
	f.Fuzz(func(t *testing.T, rank, size, local, addr, port string, mpi bool) {
		if strings.ContainsRune(rank+size+local+addr+port, 0) {
			t.Skip("an environment variable cannot hold a NUL byte")
		}
		for _, k := range []string{"RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"} {
			t.Setenv(k, "")
		}
		if mpi {
			t.Setenv("OMPI_COMM_WORLD_RANK", rank)
			t.Setenv("OMPI_COMM_WORLD_SIZE", size)
			t.Setenv("OMPI_COMM_WORLD_LOCAL_RANK", local)
		} else {
			t.Setenv("RANK", rank)
			t.Setenv("WORLD_SIZE", size)
			t.Setenv("LOCAL_RANK", local)
		}
		t.Setenv("MASTER_ADDR", addr)
		t.Setenv("MASTER_PORT", port)
		e, err := ReadEnv()
		if err != nil {
			require.Contains(t, err.Error(), "dist: ")
			return
		}
		require.GreaterOrEqual(t, e.Size, 1)
		require.True(t, e.Rank >= 0 && e.Rank < e.Size, "%+v", e)
		require.True(t, e.LocalRank >= 0 && e.LocalRank < e.Size, "%+v", e)
		require.True(t, e.MasterPort >= 1 && e.MasterPort <= 65535, "%+v", e)
		require.NotEmpty(t, e.MasterAddr)
	})
}
