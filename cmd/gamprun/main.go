// Command gamprun starts a data-parallel job: N processes of one program on this
// machine (or, through mpirun, on several), each told its place in the world, as
// torchrun does.
//
//	gamprun -n 2 -- fashion -ddp -model mlp -epochs 1 -json
//
// Every process gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT and GAMP_JOB_TOKEN — a random secret per job (unless GAMP_JOB_TOKEN is
// already set), with which the ranks prove to rank 0's TCP rendezvous (NCCL) that they
// belong to the job — and, unless it is set, GAMP_CPU_THREADS: the machine's cores
// divided among its ranks (as torchrun sets OMP_NUM_THREADS). gamp's MPI backend
// (package dist) needs an MPI launcher to connect the processes, so when mpirun is on
// PATH gamprun runs the job through it
// (mpirun --allow-run-as-root --oversubscribe -n N …) and the processes also see Open
// MPI's OMPI_COMM_WORLD_* variables; without mpirun it starts the processes itself
// (--launcher local), which suits programs that need no MPI.
//
// Output is forwarded line by line with a "[rank R] " prefix, except rank 0's standard
// output, which passes through untouched so that a -json line stays parseable. When a
// process fails the others are stopped and gamprun exits with a non-zero status.
//
// # Several machines
//
// Multi-machine jobs go through mpirun, which starts the processes over ssh:
//
//  1. Install the same Open MPI (openmpi-bin) on every machine, and put gamprun and the
//     program at the same path on each (mpirun runs them by path). Let the first
//     machine reach the others by ssh without a password.
//  2. Write a hostfile, one machine per line with its process slots:
//     node1 slots=2
//     node2 slots=2
//  3. On node1:
//     gamprun -n 4 --hostfile hosts --master-addr node1 --master-port 29500 -- /opt/bin/fashion -ddp -json
//     Ranks fill node1's slots first (ranks 0–1 on node1, 2–3 on node2); LOCAL_RANK
//     counts within each machine.
//  4. Open the ports: Open MPI's TCP transport uses ports it picks itself, between every
//     pair of machines (pin them with --mpi-args "--mca btl_tcp_port_min_v4 40000
//     --mca btl_tcp_port_range_v4 100" and open that range); choose the interface
//     with --mpi-args "--mca btl_tcp_if_include eth0". MASTER_PORT on MASTER_ADDR is
//     only used by backends that rendezvous over TCP (NCCL): rank 0 listens on
//     MASTER_ADDR alone, so give the address the other machines reach it by. The job
//     token travels to the other machines in mpirun's environment forwarding (-x
//     GAMP_JOB_TOKEN, by name, so it does not show in the process list).
//  5. Variables the program needs on the other machines must be forwarded:
//     --mpi-args "-x GAMP_MPI_LIB -x DATA_DIR" (the local ones are inherited).
package main

import (
	"bytes"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// childFlag makes gamprun, started by mpirun, export the torchrun variables and exec
// the program.
const childFlag = "-gamprun-exec-child"

func main() {
	if len(os.Args) > 1 && os.Args[1] == childFlag {
		os.Exit(execChild(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type config struct {
	n          int
	masterAddr string
	masterPort int
	launcher   string
	hostfile   string
	mpiArgs    string
	grace      time.Duration
	prog       []string
	// token is the job's secret (GAMP_JOB_TOKEN): the caller's, or a fresh random one.
	token string
}

func parse(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("gamprun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&c.n, "n", 1, "number of processes (ranks)")
	fs.StringVar(&c.masterAddr, "master-addr", "127.0.0.1", "MASTER_ADDR: address of rank 0's machine")
	fs.IntVar(&c.masterPort, "master-port", 29500, "MASTER_PORT: rendezvous port on MASTER_ADDR")
	fs.StringVar(&c.launcher, "launcher", "auto", "auto (mpirun when on PATH, else local), mpirun, or local")
	fs.StringVar(&c.hostfile, "hostfile", "", "mpirun hostfile for a multi-machine job")
	fs.StringVar(&c.mpiArgs, "mpi-args", "", "extra arguments for mpirun, space-separated")
	fs.DurationVar(&c.grace, "grace", 5*time.Second, "after a rank fails, how long the others get to exit before they are killed")
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: gamprun -n N [--master-addr A] [--master-port P] [--launcher auto|mpirun|local] -- PROGRAM [ARGS…]

Starts N processes of PROGRAM with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
MASTER_ADDR, MASTER_PORT and GAMP_JOB_TOKEN (a random secret per job unless it is
set) in their environment. When mpirun is on PATH (Open MPI: apt-get install
openmpi-bin) the processes are started through "mpirun --allow-run-as-root
--oversubscribe -n N", which gamp's MPI backend needs to connect them; otherwise
gamprun starts them itself. Unless GAMP_CPU_THREADS is set, each rank gets the
machine's cores divided among its ranks. Rank 0's standard output is forwarded as is,
everything else with a "[rank R] " prefix. If a rank fails, the others are stopped and gamprun
exits non-zero. See "go doc github.com/gamp-ml/gamp/cmd/gamprun" for several machines.

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.prog = fs.Args()
	if c.token = os.Getenv(jobTokenEnv); c.token == "" {
		c.token = rand.Text()
	}
	switch {
	case len(c.prog) == 0:
		fs.Usage()
		return c, errors.New("no program given (put it after --)")
	case c.n < 1:
		return c, fmt.Errorf("-n must be ≥ 1, got %d", c.n)
	case c.masterPort < 1 || c.masterPort > 65535:
		return c, fmt.Errorf("--master-port must be in 1–65535, got %d", c.masterPort)
	}
	switch c.launcher {
	case "auto":
		c.launcher = "local"
		if _, err := exec.LookPath("mpirun"); err == nil {
			c.launcher = "mpirun"
		}
	case "mpirun":
		if _, err := exec.LookPath("mpirun"); err != nil {
			return c, errors.New("--launcher mpirun: mpirun is not on PATH (install Open MPI: apt-get install -y openmpi-bin)")
		}
	case "local":
		if c.hostfile != "" {
			return c, errors.New("--hostfile needs the mpirun launcher")
		}
	default:
		return c, fmt.Errorf("unknown --launcher %q (want auto, mpirun or local)", c.launcher)
	}
	return c, nil
}

// run is gamprun's main; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	c, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "gamprun:", err)
		return 2
	}
	out := &router{stdout: stdout, stderr: stderr}
	if c.launcher == "mpirun" {
		return runMPI(c, out)
	}
	return runLocal(c, out)
}

// jobTokenEnv is dist.JobTokenEnv, spelled out so that the launcher does not link the
// training packages.
const jobTokenEnv = "GAMP_JOB_TOKEN"

// worldEnv is the torchrun variables for one rank, the job token (when there is one),
// plus GAMP_CPU_THREADS (unless set): the machine's cores shared among its ranks, as
// torchrun sets OMP_NUM_THREADS, so the ranks' CPU workers do not fight over the cores.
func worldEnv(rank, size, local, localSize int, addr string, port int, token string) []string {
	env := []string{
		"RANK=" + strconv.Itoa(rank), "WORLD_SIZE=" + strconv.Itoa(size),
		"LOCAL_RANK=" + strconv.Itoa(local), "LOCAL_WORLD_SIZE=" + strconv.Itoa(localSize),
		"MASTER_ADDR=" + addr, "MASTER_PORT=" + strconv.Itoa(port),
	}
	if token != "" {
		env = append(env, jobTokenEnv+"="+token)
	}
	if os.Getenv("GAMP_CPU_THREADS") == "" && localSize > 1 {
		env = append(env, "GAMP_CPU_THREADS="+strconv.Itoa(max(1, runtime.NumCPU()/localSize)))
	}
	return env
}

// setEnv returns env with the KEY=VALUE pairs of kv replacing any earlier values (a
// program reading its environment with getenv sees the first of duplicates).
func setEnv(env []string, kv ...string) []string {
	keys := map[string]bool{}
	for _, p := range kv {
		k, _, _ := strings.Cut(p, "=")
		keys[k] = true
	}
	out := make([]string, 0, len(env)+len(kv))
	for _, p := range env {
		if k, _, _ := strings.Cut(p, "="); !keys[k] {
			out = append(out, p)
		}
	}
	return append(out, kv...)
}

// runLocal starts the ranks as children of gamprun.
func runLocal(c config, out *router) int {
	path, err := exec.LookPath(c.prog[0])
	if err != nil {
		fmt.Fprintln(out.stderr, "gamprun:", err)
		return 127
	}
	type exit struct {
		rank int
		err  error
	}
	exits := make(chan exit, c.n)
	cmds := make([]*exec.Cmd, c.n)
	exited := make([]atomic.Bool, c.n)
	var streams sync.WaitGroup
	for r := range c.n {
		cmd := exec.Command(path, c.prog[1:]...)
		cmd.Env = setEnv(os.Environ(), worldEnv(r, c.n, r, c.n, c.masterAddr, c.masterPort, c.token)...)
		cmd.Stdin = nil
		cmd.SysProcAttr = rankProcAttr()
		if r == 0 {
			cmd.Stdout = out.raw()
		} else {
			cmd.Stdout = out.prefixed(r, false)
		}
		cmd.Stderr = out.prefixed(r, true)
		if err := cmd.Start(); err != nil {
			fmt.Fprintf(out.stderr, "gamprun: starting rank %d: %v\n", r, err)
			stopAll(cmds[:r], exited, syscall.SIGKILL)
			return 127
		}
		cmds[r] = cmd
		streams.Add(1)
		go func() {
			defer streams.Done()
			err := cmd.Wait()
			exited[r].Store(true)
			exits <- exit{r, err}
		}()
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	status := 0
	var kill <-chan time.Time
	for left := c.n; left > 0; {
		select {
		case e := <-exits:
			left--
			if e.err == nil || status != 0 {
				continue
			}
			status = exitStatus(e.err)
			fmt.Fprintf(out.stderr, "gamprun: rank %d failed (%v); stopping the other ranks\n", e.rank, e.err)
			stopAll(cmds, exited, syscall.SIGTERM)
			kill = time.After(c.grace)
		case s := <-sigs:
			if status == 0 {
				status = 130
			}
			stopAll(cmds, exited, s.(syscall.Signal))
			kill = time.After(c.grace)
		case <-kill:
			stopAll(cmds, exited, syscall.SIGKILL)
		}
	}
	streams.Wait()
	out.flush()
	return status
}

// stopAll signals the process group of every rank still running.
func stopAll(cmds []*exec.Cmd, exited []atomic.Bool, sig syscall.Signal) {
	for r, cmd := range cmds {
		if cmd != nil && cmd.Process != nil && !exited[r].Load() {
			signalRank(cmd.Process, sig)
		}
	}
}

// exitStatus maps a rank's failure to gamprun's exit status.
func exitStatus(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		if code := ee.ExitCode(); code > 0 {
			return code
		}
	}
	return 1
}

// runMPI runs the job through mpirun, which starts gamprun itself in child mode on
// every rank (to export the torchrun variables) and tags each output line with its
// rank.
func runMPI(c config, out *router) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(out.stderr, "gamprun:", err)
		return 1
	}
	args := []string{"--allow-run-as-root", "--oversubscribe", "--tag-output", "-n", strconv.Itoa(c.n)}
	if c.hostfile != "" {
		args = append(args, "--hostfile", c.hostfile)
	}
	for _, kv := range []string{"MASTER_ADDR=" + c.masterAddr, "MASTER_PORT=" + strconv.Itoa(c.masterPort)} {
		args = append(args, "-x", kv)
	}
	// The token by name only: mpirun forwards the value from its environment, so the
	// secret is not on any command line.
	args = append(args, "-x", jobTokenEnv)
	args = append(args, strings.Fields(c.mpiArgs)...)
	args = append(args, self, childFlag, "--")
	args = append(args, c.prog...)
	cmd := exec.Command("mpirun", args...)
	cmd.Env = setEnv(os.Environ(), "MASTER_ADDR="+c.masterAddr, "MASTER_PORT="+strconv.Itoa(c.masterPort), jobTokenEnv+"="+c.token)
	cmd.Stdout = &tagSplitter{out: out, stream: "stdout"}
	cmd.Stderr = &tagSplitter{out: out, stream: "stderr"}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(out.stderr, "gamprun:", err)
		return 127
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err2 error
	for waiting := true; waiting; {
		select {
		case err2 = <-done:
			waiting = false
		case s := <-sigs:
			// mpirun forwards SIGINT/SIGTERM to the ranks and tears the job down.
			cmd.Process.Signal(s)
		}
	}
	cmd.Stdout.(*tagSplitter).Close()
	cmd.Stderr.(*tagSplitter).Close()
	out.flush()
	if err2 != nil {
		fmt.Fprintf(out.stderr, "gamprun: mpirun: %v\n", err2)
		return exitStatus(err2)
	}
	return 0
}

// execChild runs on every rank under mpirun: export the torchrun variables from Open
// MPI's and replace this process by the program (so it is the MPI process mpirun
// started, with its environment).
func execChild(args []string) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "gamprun: no program to run")
		return 2
	}
	get := func(name string) int {
		n, err := strconv.Atoi(os.Getenv(name))
		if err != nil {
			fmt.Fprintf(os.Stderr, "gamprun: %s=%q: not started by Open MPI's mpirun?\n", name, os.Getenv(name))
			os.Exit(2)
		}
		return n
	}
	rank, size := get("OMPI_COMM_WORLD_RANK"), get("OMPI_COMM_WORLD_SIZE")
	local, localSize := get("OMPI_COMM_WORLD_LOCAL_RANK"), get("OMPI_COMM_WORLD_LOCAL_SIZE")
	port, err := strconv.Atoi(os.Getenv("MASTER_PORT"))
	if err != nil {
		port = 29500
	}
	addr := os.Getenv("MASTER_ADDR")
	if addr == "" {
		addr = "127.0.0.1"
	}
	// The token came from gamprun through mpirun; without it (mpirun started this mode
	// by hand) the ranks have none, and a TCP rendezvous says so.
	env := setEnv(os.Environ(), worldEnv(rank, size, local, localSize, addr, port, os.Getenv(jobTokenEnv))...)
	path, err := exec.LookPath(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "gamprun:", err)
		return 127
	}
	err = syscall.Exec(path, args, env)
	fmt.Fprintf(os.Stderr, "gamprun: exec %s: %v\n", path, err)
	return 127
}

// router writes the ranks' output: rank 0's stdout as is, the rest with a prefix, in
// whole segments (up to a newline or carriage return) so ranks do not interleave
// inside a line.
type router struct {
	mu             sync.Mutex
	stdout, stderr io.Writer
	parts          []*prefixWriter
}

// raw is rank 0's stdout: no prefix, but whole lines, so other ranks' lines cannot
// land inside one of its lines.
func (r *router) raw() io.Writer {
	p := &prefixWriter{r: r, w: r.stdout}
	r.mu.Lock()
	r.parts = append(r.parts, p)
	r.mu.Unlock()
	return p
}

type lockedWriter struct {
	r *router
	w io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.r.mu.Lock()
	defer l.r.mu.Unlock()
	return l.w.Write(p)
}

func (r *router) prefixed(rank int, stderr bool) *prefixWriter {
	w := r.stdout
	if stderr {
		w = r.stderr
	}
	p := &prefixWriter{r: r, w: w, prefix: []byte(fmt.Sprintf("[rank %d] ", rank))}
	r.mu.Lock()
	r.parts = append(r.parts, p)
	r.mu.Unlock()
	return p
}

// flush writes what is left of unterminated lines.
func (r *router) flush() {
	r.mu.Lock()
	parts := r.parts
	r.mu.Unlock()
	for _, p := range parts {
		p.Close()
	}
}

// prefixWriter puts its prefix before every segment of output.
type prefixWriter struct {
	r      *router
	w      io.Writer
	prefix []byte
	buf    []byte
	mu     sync.Mutex
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexAny(p.buf, "\r\n")
		if i < 0 {
			break
		}
		p.emit(p.buf[:i+1])
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

func (p *prefixWriter) emit(seg []byte) {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	p.w.Write(append(append([]byte(nil), p.prefix...), seg...))
}

// Close writes an unterminated last segment.
func (p *prefixWriter) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.buf) > 0 {
		p.emit(append(p.buf, '\n'))
		p.buf = nil
	}
	return nil
}

// tagSplitter reads the output mpirun --tag-output writes — every chunk a rank
// writes, preceded by "[jobid,rank]<stdout>:" (or <stderr>, <stddiag>), chunks of
// different ranks interleaved, no newline added — and routes each rank's text by the
// router's rule. Untagged text continues the stream of the tag before it (a chunk can
// hold several lines); text before the first tag (mpirun's own) passes through.
type tagSplitter struct {
	out    *router
	stream string
	buf    []byte
	cur    io.Writer
	dests  map[string]io.Writer
}

var tagRe = regexp.MustCompile(`\[\d+,\d+\]<(?:stdout|stderr|stddiag)>:`)

func (t *tagSplitter) Write(b []byte) (int, error) {
	t.buf = append(t.buf, b...)
	for {
		loc := tagRe.FindIndex(t.buf)
		if loc == nil {
			break
		}
		t.emit(t.buf[:loc[0]])
		rank, stream, _, _ := parseTag(t.buf[loc[0]:loc[1]])
		t.cur = t.dest(rank, stream)
		t.buf = t.buf[loc[1]:]
	}
	// Keep a tail that may be the start of a tag split across writes.
	keep := 0
	if i := bytes.LastIndexByte(t.buf, '['); i >= 0 && len(t.buf)-i < 40 && !bytes.ContainsAny(t.buf[i:], "\r\n") {
		keep = len(t.buf) - i
	}
	t.emit(t.buf[:len(t.buf)-keep])
	t.buf = append(t.buf[:0], t.buf[len(t.buf)-keep:]...)
	return len(b), nil
}

func (t *tagSplitter) emit(text []byte) {
	if len(text) == 0 {
		return
	}
	w := t.cur
	if w == nil {
		w = t.out.stdout
		if t.stream == "stderr" {
			w = t.out.stderr
		}
		w = lockedWriter{t.out, w}
	}
	w.Write(text)
}

func (t *tagSplitter) dest(rank int, stream string) io.Writer {
	key := fmt.Sprintf("%d/%s", rank, stream)
	if w, ok := t.dests[key]; ok {
		return w
	}
	var w io.Writer
	if rank == 0 && stream == "stdout" {
		w = t.out.raw()
	} else {
		w = t.out.prefixed(rank, stream == "stderr")
	}
	if t.dests == nil {
		t.dests = map[string]io.Writer{}
	}
	t.dests[key] = w
	return w
}

// Close writes what is left.
func (t *tagSplitter) Close() error {
	t.emit(t.buf)
	t.buf = nil
	return nil
}

// parseTag splits a tag "[1,0]<stdout>:…" into rank 0, "stdout" (stddiag counts as
// stderr) and the text after it.
func parseTag(l []byte) (rank int, stream string, text []byte, ok bool) {
	if len(l) < 2 || l[0] != '[' {
		return 0, "", nil, false
	}
	end := bytes.IndexByte(l, ']')
	if end < 0 {
		return 0, "", nil, false
	}
	ids := strings.Split(string(l[1:end]), ",")
	if len(ids) != 2 {
		return 0, "", nil, false
	}
	r, err := strconv.Atoi(ids[1])
	if err != nil {
		return 0, "", nil, false
	}
	rest := l[end+1:]
	for _, st := range []string{"stdout", "stderr", "stddiag"} {
		tag := "<" + st + ">:"
		if bytes.HasPrefix(rest, []byte(tag)) {
			if st == "stddiag" {
				st = "stderr"
			}
			return r, st, rest[len(tag):], true
		}
	}
	return 0, "", nil, false
}
