package dist

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/internal/testenv"
	"github.com/gamp-ml/gamp/tensor"
)

// Tests that need several processes re-run this test binary under mpirun with
// GAMP_DIST_CHILD=1 and -test.run selecting a child test; the child tests skip
// otherwise. Without Open MPI they skip, and GAMP_REQUIRE_MPI=1 turns the skip into a
// failure (CI installs openmpi-bin).

const childEnv = "GAMP_DIST_CHILD"

func isChild() bool { return os.Getenv(childEnv) == "1" }

func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	testenv.Skip(t, testenv.MPI, format, args...)
}

// needMPI returns mpirun's path, or skips (fails under GAMP_REQUIRE_MPI=1).
func needMPI(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("spawns MPI processes; skipped with -short")
	}
	if _, err := loadMPI(); err != nil {
		skipOrFail(t, "needs Open MPI: %v", err)
	}
	path, err := exec.LookPath("mpirun")
	if err != nil {
		skipOrFail(t, "needs mpirun: install openmpi-bin")
	}
	return path
}

// mpirun runs the child test named test in n processes and returns their combined
// output; env holds extra KEY=VALUE pairs for the children.
func mpirun(t *testing.T, n int, test string, env ...string) string {
	t.Helper()
	path := needMPI(t)
	args := []string{"--allow-run-as-root", "--oversubscribe", "-n", strconv.Itoa(n)}
	env = append(env, childEnv+"=1")
	for _, kv := range env {
		args = append(args, "-x", kv)
	}
	args = append(args, os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+test) {
		t.Fatalf("the child test %s did not pass:\n%s", test, out)
	}
	return string(out)
}

func TestMPICollectives(t *testing.T) {
	needMPI(t)
	for _, mode := range []string{"0", "1"} {
		t.Run("GAMP_MPI_BLOCKING="+mode, func(t *testing.T) {
			mpirun(t, 2, "TestChildCollectives", "GAMP_MPI_BLOCKING="+mode)
		})
	}
	// Three processes: an odd world size, and Avg dividing by 3.
	mpirun(t, 3, "TestChildThree")
}

func TestChildThree(t *testing.T) {
	if !isChild() {
		t.Skip("child of TestMPICollectives")
	}
	pg, err := Init()
	require.NoError(t, err)
	defer func() { require.NoError(t, pg.Close()) }()
	require.Equal(t, 3, pg.Size())
	x := tensor.FromSlice([]float32{float32(pg.Rank()), 1}, nil)
	require.NoError(t, pg.AllReduce(x, Avg))
	require.Equal(t, []float32{1, 1}, x.Float32s())
	require.NoError(t, pg.Barrier())
}

// TestInitWithoutMPI runs a child whose GAMP_MPI_LIB points nowhere: Init must say
// what to install. It needs no MPI.
func TestInitWithoutMPI(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildNoMPI$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1", "GAMP_MPI_LIB=/no/such/libmpi.so.40", "GAMP_DIST_BACKEND=mpi")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "--- PASS: TestChildNoMPI")
}

func TestChildNoMPI(t *testing.T) {
	if !isChild() {
		t.Skip("child of TestInitWithoutMPI")
	}
	_, err := Init()
	require.ErrorIs(t, err, ErrNoMPI)
	require.Contains(t, err.Error(), "apt-get install -y openmpi-bin libopenmpi3")
	require.Contains(t, err.Error(), "/no/such/libmpi.so.40")
}

func TestChildCollectives(t *testing.T) {
	if !isChild() {
		t.Skip("child of TestMPICollectives")
	}
	pg, err := Init()
	require.NoError(t, err)
	defer func() { require.NoError(t, pg.Close()) }()
	require.Equal(t, "mpi", pg.Backend())
	n, r := pg.Size(), pg.Rank()
	require.Equal(t, 2, n)
	rf := float64(r)

	// Every reduction on every dtype: rank r holds r+1+i at element i.
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64, tensor.Float16, tensor.BFloat16, tensor.Int32, tensor.Int64} {
		for _, op := range []ReduceOp{Sum, Avg, Max, Min} {
			if op == Avg && !dt.IsFloat() {
				continue
			}
			x := tensor.FromSlice([]float64{rf + 1, rf + 2, rf + 3}, nil, tensor.WithDType(dt))
			require.NoError(t, pg.AllReduce(x, op), "%s %s", dt, op)
			want := map[ReduceOp][]float64{Sum: {3, 5, 7}, Avg: {1.5, 2.5, 3.5}, Max: {2, 3, 4}, Min: {1, 2, 3}}[op]
			require.Equal(t, want, x.Float64s(), "%s %s", dt, op)
			require.Equal(t, dt, x.DType())
		}
	}
	// Broadcast keeps bits exactly, from any root, strided tensors too.
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float16, tensor.BFloat16, tensor.Int64, tensor.Bool} {
		x := tensor.FromSlice([]float64{rf, rf + 0.1, 1}, nil, tensor.WithDType(dt))
		want := tensor.FromSlice([]float64{1, 1.1, 1}, nil, tensor.WithDType(dt)).Float64s()
		require.NoError(t, pg.Broadcast(x, 1))
		require.Equal(t, want, x.Float64s(), "%s", dt)
	}
	m := tensor.FromSlice([]float64{rf, rf, rf, rf, rf, rf}, tensor.Shape{2, 3}, tensor.WithDType(tensor.Float32)).Transpose(0, 1)
	require.NoError(t, pg.Broadcast(m, 1))
	require.Equal(t, []float32{1, 1, 1, 1, 1, 1}, m.Float32s())

	// Several large all-reduces in flight at once complete in any wait order.
	var hs []Handle
	var xs []*tensor.Tensor
	for k := range 4 {
		x := tensor.Full(tensor.Shape{1 << 20}, rf+float64(k))
		xs = append(xs, x)
		hs = append(hs, pg.AllReduceAsync(x, Sum))
	}
	for k := len(hs) - 1; k >= 0; k-- {
		require.NoError(t, hs[k].Wait())
		require.NoError(t, hs[k].Wait())
		v := xs[k].Float32s()
		require.Equal(t, float32(1+2*k), v[0])
		require.Equal(t, float32(1+2*k), v[len(v)-1])
	}
	require.NoError(t, pg.Barrier())
	require.Error(t, pg.Broadcast(tensor.Zeros(tensor.Shape{1}), 2))
	require.Error(t, pg.AllReduce(tensor.Zeros(tensor.Shape{1}, tensor.WithDType(tensor.Int32)), Avg))
}
