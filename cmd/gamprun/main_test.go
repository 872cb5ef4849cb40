package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gamp-ml/gamp/dist"
	"github.com/gamp-ml/gamp/internal/testenv"
)

// The test binary doubles as the program gamprun starts (GAMPRUN_TEST_HELPER says
// what it does) and, under mpirun, as gamprun's child mode.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == childFlag {
		os.Exit(execChild(os.Args[2:]))
	}
	switch os.Getenv("GAMPRUN_TEST_HELPER") {
	case "print":
		fmt.Printf("rank=%s world=%s local=%s/%s master=%s:%s threads=%s\n", os.Getenv("RANK"), os.Getenv("WORLD_SIZE"),
			os.Getenv("LOCAL_RANK"), os.Getenv("LOCAL_WORLD_SIZE"), os.Getenv("MASTER_ADDR"), os.Getenv("MASTER_PORT"), os.Getenv("GAMP_CPU_THREADS"))
		fmt.Fprintf(os.Stderr, "hello from %s\n", os.Getenv("RANK"))
		os.Exit(0)
	case "token":
		fmt.Printf("token=%s\n", os.Getenv(jobTokenEnv))
		os.Exit(0)
	case "rendezvous":
		// The TCP rendezvous NCCL uses, with what gamprun put in the environment.
		env, err := dist.ReadEnv()
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		var blob []byte
		if env.Rank == 0 {
			blob = []byte("id from rank 0")
		}
		got, err := dist.Rendezvous(env, blob, 30*time.Second)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Printf("rank %d got %q\n", env.Rank, got)
		os.Exit(0)
	case "fail":
		if os.Getenv("RANK") == "1" {
			fmt.Println("rank 1 gives up")
			os.Exit(3)
		}
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	remove := testenv.PrivateTMPDIR() // mpirun's session directory, apart from other packages'
	code := m.Run()
	remove()
	os.Exit(code)
}

func launchers(t *testing.T) []string {
	l := []string{"local"}
	if _, err := exec.LookPath("mpirun"); err == nil {
		l = append(l, "mpirun")
	} else {
		testenv.Fallback(t, testenv.MPI, "mpirun not found: testing the local launcher only")
	}
	return l
}

func gamprun(t *testing.T, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	var o, e bytes.Buffer
	status = run(args, &o, &e)
	return o.String(), e.String(), status
}

func TestEnvironmentAndOutput(t *testing.T) {
	t.Setenv("GAMPRUN_TEST_HELPER", "print")
	t.Setenv("GAMP_CPU_THREADS", "")
	for _, l := range launchers(t) {
		t.Run(l, func(t *testing.T) {
			out, errOut, status := gamprun(t, "-n", "2", "--launcher", l, "--master-addr", "10.1.2.3", "--master-port", "29611", "--", os.Args[0])
			require.Equal(t, 0, status, "stdout:\n%s\nstderr:\n%s", out, errOut)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			require.ElementsMatch(t, []string{
				"rank=0 world=2 local=0/2 master=10.1.2.3:29611 threads=1",
				"[rank 1] rank=1 world=2 local=1/2 master=10.1.2.3:29611 threads=1",
			}, lines, "rank 0's stdout unprefixed, rank 1's prefixed")
			require.Contains(t, errOut, "[rank 0] hello from 0\n")
			require.Contains(t, errOut, "[rank 1] hello from 1\n")
		})
	}
}

// TestJobToken: every rank of a job gets the same GAMP_JOB_TOKEN, a fresh random one
// per job unless the caller set it.
func TestJobToken(t *testing.T) {
	t.Setenv("GAMPRUN_TEST_HELPER", "token")
	for _, l := range launchers(t) {
		t.Run(l, func(t *testing.T) {
			tokens := func() []string {
				out, errOut, status := gamprun(t, "-n", "2", "--launcher", l, "--", os.Args[0])
				require.Equal(t, 0, status, "stdout:\n%s\nstderr:\n%s", out, errOut)
				var got []string
				for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
					_, tok, ok := strings.Cut(line, "token=")
					require.True(t, ok, line)
					got = append(got, tok)
				}
				require.Len(t, got, 2)
				require.Equal(t, got[0], got[1], "both ranks of a job share its token")
				return got
			}
			t.Setenv(jobTokenEnv, "")
			a, b := tokens(), tokens()
			require.GreaterOrEqual(t, len(a[0]), 16, "long enough for dist.Rendezvous")
			require.NotEqual(t, a[0], b[0], "a fresh token per job")
			t.Setenv(jobTokenEnv, "set-by-hand-0123456789")
			require.Equal(t, "set-by-hand-0123456789", tokens()[0], "the caller's token is kept")
		})
	}
}

// TestRendezvousThroughGamprun: the ranks gamprun starts meet over TCP with the token it
// handed them, under both launchers.
func TestRendezvousThroughGamprun(t *testing.T) {
	t.Setenv("GAMPRUN_TEST_HELPER", "rendezvous")
	t.Setenv(jobTokenEnv, "")
	for _, l := range launchers(t) {
		t.Run(l, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			port := ln.Addr().(*net.TCPAddr).Port
			ln.Close()
			out, errOut, status := gamprun(t, "-n", "3", "--launcher", l, "--master-addr", "127.0.0.1", "--master-port", strconv.Itoa(port), "--", os.Args[0])
			require.Equal(t, 0, status, "stdout:\n%s\nstderr:\n%s", out, errOut)
			for r := range 3 {
				require.Contains(t, out, fmt.Sprintf("rank %d got \"id from rank 0\"", r))
			}
		})
	}
}

func TestFailingRankStopsTheJob(t *testing.T) {
	t.Setenv("GAMPRUN_TEST_HELPER", "fail")
	for _, l := range launchers(t) {
		t.Run(l, func(t *testing.T) {
			start := time.Now()
			out, errOut, status := gamprun(t, "-n", "2", "--launcher", l, "--", os.Args[0])
			require.NotEqual(t, 0, status)
			require.Less(t, time.Since(start), 30*time.Second, "rank 0 (sleeping a minute) was stopped")
			require.Contains(t, out, "[rank 1] rank 1 gives up")
			require.NotEmpty(t, errOut)
		})
	}
}

func TestBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-n", "2"},
		{"-n", "0", "--", "true"},
		{"--launcher", "ssh", "--", "true"},
		{"--master-port", "0", "--", "true"},
		{"--launcher", "local", "--hostfile", "h", "--", "true"},
	} {
		_, errOut, status := gamprun(t, args...)
		require.Equal(t, 2, status, "%v", args)
		require.Contains(t, errOut, "gamprun:", "%v", args)
	}
	_, errOut, status := gamprun(t, "-n", "1", "--launcher", "local", "--", "/no/such/program")
	require.Equal(t, 127, status)
	require.Contains(t, errOut, "no/such/program")
}

func TestParseTag(t *testing.T) {
	for _, c := range []struct {
		in     string
		rank   int
		stream string
		text   string
		ok     bool
	}{
		{"[1,0]<stdout>:hello\n", 0, "stdout", "hello\n", true},
		{"[63210,12]<stderr>:x:y\n", 12, "stderr", "x:y\n", true},
		{"[1,3]<stddiag>:warn\n", 3, "stderr", "warn\n", true},
		{"plain mpirun message\n", 0, "", "", false},
		{"[1,x]<stdout>:no\n", 0, "", "", false},
	} {
		r, s, text, ok := parseTag([]byte(c.in))
		require.Equal(t, c.ok, ok, c.in)
		if ok {
			require.Equal(t, c.rank, r, c.in)
			require.Equal(t, c.stream, s, c.in)
			require.Equal(t, c.text, string(text), c.in)
		}
	}
}

func TestTagSplitter(t *testing.T) {
	var o, e bytes.Buffer
	r := &router{stdout: &o, stderr: &e}
	out := &tagSplitter{out: r, stream: "stdout"}
	errs := &tagSplitter{out: r, stream: "stderr"}
	// Chunks as mpirun writes them: a tag before each, no newline added, a tag split
	// across two writes, a progress bar redrawn with \r.
	for _, w := range []string{
		"[7,0]<stdout>:{\"json\":", "[7,1]<stdout>:one\n[7,0]<stdout>:1}\n", "[7,", "1]<stdout>:two\n",
	} {
		out.Write([]byte(w))
	}
	for _, w := range []string{"[7,0]<stderr>:step 1\r", "[7,0]<stderr>:step 2\r[7,1]<stddiag>:warn\n", "[7,0]<stderr>:done\n", "mpirun: bye\n"} {
		errs.Write([]byte(w))
	}
	out.Close()
	errs.Close()
	r.flush()
	// Rank 0's JSON line stays whole though rank 1's line arrived in its middle.
	require.Equal(t, "[rank 1] one\n{\"json\":1}\n[rank 1] two\n", o.String())
	require.Equal(t, "[rank 0] step 1\r[rank 0] step 2\r[rank 1] warn\n[rank 0] done\n[rank 0] mpirun: bye\n", e.String())
}

// writeIDX writes n Fashion-MNIST-shaped examples whose class lights up a band of rows.
func writeIDX(t *testing.T, dir, prefix string, n int) {
	var img, lab bytes.Buffer
	binary.Write(&img, binary.BigEndian, []uint32{0x803, uint32(n), 28, 28})
	binary.Write(&lab, binary.BigEndian, []uint32{0x801, uint32(n)})
	for i := range n {
		c := (i * 7) % 10
		lab.WriteByte(byte(c))
		for p := range 784 {
			v := byte((i*31 + p*17) % 40)
			if (p/28)/3 == c {
				v = 200
			}
			img.WriteByte(v)
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, prefix+"-images-idx3-ubyte"), img.Bytes(), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, prefix+"-labels-idx1-ubyte"), lab.Bytes(), 0o644))
}

// TestFashionDDP runs the main job as two MPI ranks through gamprun.
func TestFashionDDP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs examples/fashion in two processes")
	}
	testenv.Programs(t, testenv.MPI, "mpirun")
	dir := t.TempDir()
	bin := filepath.Join(dir, "fashion")
	build := exec.Command("go", "build", "-o", bin, "github.com/gamp-ml/gamp/examples/fashion")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	writeIDX(t, dir, "train", 512)
	writeIDX(t, dir, "t10k", 128)
	stdout, stderr, status := gamprun(t, "-n", "2", "--", bin, "-ddp", "-model", "mlp", "-epochs", "1", "-batch", "64", "-json", "-quiet", "-data", dir)
	require.Equal(t, 0, status, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	var s struct {
		WorldSize int     `json:"world_size"`
		Steps     int     `json:"steps"`
		Accuracy  float64 `json:"test_accuracy"`
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 1, "rank 0 prints the one JSON line, unprefixed:\n%s", stdout)
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &s), lines[0])
	require.Equal(t, 2, s.WorldSize)
	require.Equal(t, 8, s.Steps, "512 examples, global batch 64")
	require.Greater(t, s.Accuracy, 0.3)
}
