package dist

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every test here listens and dials on 127.0.0.1 (127.0.0.2 once, to show that rank 0
// is not reachable there), with bounded numbers of connections and deadlines.

const testJobToken = "a-test-job-token-0123456789"

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func rdvEnv(port, rank, size int) Env {
	return Env{Rank: rank, Size: size, MasterAddr: "127.0.0.1", MasterPort: port, JobToken: testJobToken}
}

type rdvResult struct {
	blob []byte
	err  error
}

// goRendezvous runs one rank in a goroutine.
func goRendezvous(env Env, blob []byte, timeout time.Duration) <-chan rdvResult {
	ch := make(chan rdvResult, 1)
	go func() {
		b, err := Rendezvous(env, blob, timeout)
		ch <- rdvResult{b, err}
	}()
	return ch
}

// dialGreeted connects to rank 0 and reads its greeting, retrying (a bounded number
// of times) until rank 0 listens; it returns the connection and rank 0's nonce.
func dialGreeted(t *testing.T, port int) (net.Conn, []byte) {
	t.Helper()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for range 500 {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		g := make([]byte, len(rendezvousMagic)+rdvNonceLen)
		_, err = io.ReadFull(c, g)
		require.NoError(t, err)
		require.Equal(t, rendezvousMagic, string(g[:len(rendezvousMagic)]))
		return c, g[len(rendezvousMagic):]
	}
	t.Fatalf("rank 0 never listened on %s", addr)
	return nil, nil
}

// claim sends a hello for rank/size whose MAC uses token and nonce, and returns rank
// 0's status byte.
func claim(t *testing.T, c net.Conn, token string, nonce []byte, rank, size int) byte {
	t.Helper()
	cn := make([]byte, rdvNonceLen)
	rand.Read(cn)
	hello := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32([]byte(rendezvousMagic), uint32(rank)), uint32(size))
	hello = append(hello, cn...)
	hello = append(hello, helloMAC([]byte(token), nonce, cn, rank, size)...)
	_, err := c.Write(hello)
	require.NoError(t, err)
	var st [1]byte
	_, err = io.ReadFull(c, st[:])
	require.NoError(t, err)
	return st[0]
}

func TestRendezvous(t *testing.T) {
	port := freePort(t)
	const n = 4
	id := []byte("a 128-byte ncclUniqueId would go here")
	got := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := n - 1; r >= 0; r-- { // the others dial before rank 0 listens
		wg.Go(func() {
			var blob []byte
			if r == 0 {
				time.Sleep(50 * time.Millisecond)
				blob = id
			}
			got[r], errs[r] = Rendezvous(rdvEnv(port, r, n), blob, 10*time.Second)
		})
	}
	wg.Wait()
	for r := range n {
		require.NoError(t, errs[r], "rank %d", r)
		require.Equal(t, id, got[r], "rank %d", r)
	}
	// Nobody listening: a clear error once the deadline passes.
	_, err := Rendezvous(rdvEnv(freePort(t), 1, 2), nil, 200*time.Millisecond)
	require.ErrorContains(t, err, "cannot reach rank 0")
	_, err = Rendezvous(rdvEnv(port, 2, 2), nil, time.Second)
	require.ErrorContains(t, err, "outside a world of size 2")
	// Rank 0 waiting for a rank that never comes: the error names it.
	_, err = Rendezvous(rdvEnv(freePort(t), 0, 3), id, 300*time.Millisecond)
	require.ErrorContains(t, err, "1 of 3 ranks joined before the deadline (missing ranks [1 2]")
	// A world of one needs no token and no network.
	b, err := Rendezvous(Env{Size: 1}, id, time.Second)
	require.NoError(t, err)
	require.Equal(t, id, b)
}

func TestRendezvousNeedsToken(t *testing.T) {
	for _, tok := range []string{"", "short"} {
		for _, r := range []int{0, 1} {
			e := rdvEnv(freePort(t), r, 2)
			e.JobToken = tok
			_, err := Rendezvous(e, nil, time.Second)
			require.ErrorContains(t, err, JobTokenEnv, "rank %d token %q", r, tok)
			require.ErrorContains(t, err, "gamprun")
		}
	}
	t.Setenv(JobTokenEnv, testJobToken)
	e, err := ReadEnv()
	require.NoError(t, err)
	require.Equal(t, testJobToken, e.JobToken)
	for _, s := range []string{e.String(), fmt.Sprintf("%v %+v", e, e)} {
		require.NotContains(t, s, testJobToken, "printing an Env leaks no token")
		require.Contains(t, s, "job token set")
	}
}

// TestRendezvousHostileClients: a client that connects and says nothing, one that
// sends garbage, one that claims rank 1 with the wrong token, and one that replays a
// hello made for another connection, all before the real ranks; the job still forms.
// The hello timeout is set far beyond the job's deadline, so a rank 0 that read hellos
// one after another would wait on the silent client until the job failed.
func TestRendezvousHostileClients(t *testing.T) {
	old := rdvHelloTimeout
	rdvHelloTimeout = time.Hour
	defer func() { rdvHelloTimeout = old }()

	port := freePort(t)
	const n = 3
	id := []byte("the job's ncclUniqueId")
	root := goRendezvous(rdvEnv(port, 0, n), id, 30*time.Second)

	silent, _ := dialGreeted(t, port)
	defer silent.Close()

	garbage, _ := dialGreeted(t, port)
	_, err := garbage.Write(make([]byte, 2*rdvHelloLen))
	require.NoError(t, err)
	defer garbage.Close()

	impostor, nonce := dialGreeted(t, port)
	require.Equal(t, rdvBadToken, claim(t, impostor, "another-job's-token-0123456789", nonce, 1, n), "a wrong token claims no rank")
	_, err = impostor.Read(make([]byte, 1))
	require.Error(t, err, "rank 0 closes the impostor's connection")

	replay, _ := dialGreeted(t, port)
	require.Equal(t, rdvBadToken, claim(t, replay, testJobToken, nonce, 1, n), "a hello made for another connection's nonce is refused")
	replay.Close()

	ranks := []<-chan rdvResult{root, goRendezvous(rdvEnv(port, 1, n), nil, 30*time.Second), goRendezvous(rdvEnv(port, 2, n), nil, 30*time.Second)}
	for r, ch := range ranks {
		res := <-ch
		require.NoError(t, res.err, "rank %d", r)
		require.Equal(t, id, res.blob, "rank %d", r)
	}
	// Once the job formed, rank 0 dropped the silent client without sending it anything
	// past the greeting.
	rest, err := io.ReadAll(silent)
	require.Empty(t, rest)
	require.NoError(t, err, "an orderly close")
}

// TestRendezvousBindsMasterAddrOnly: rank 0 listening for 127.0.0.1 cannot be reached
// on another loopback address, and an unspecified MASTER_ADDR is refused.
func TestRendezvousBindsMasterAddrOnly(t *testing.T) {
	for _, a := range []string{"0.0.0.0", "::", ""} {
		e := rdvEnv(freePort(t), 0, 2)
		e.MasterAddr = a
		_, err := Rendezvous(e, nil, time.Second)
		require.ErrorContains(t, err, "every interface", "MASTER_ADDR=%q", a)
	}

	port := freePort(t)
	root := goRendezvous(rdvEnv(port, 0, 2), []byte("id"), 20*time.Second)
	probe, _ := dialGreeted(t, port) // rank 0 is listening
	probe.Close()
	if ctl, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		t.Logf("127.0.0.2 is not a loopback address here (%v): the other-address check is left out", err)
	} else {
		ctl.Close()
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(port)), time.Second)
		if err == nil {
			c.Close()
		}
		require.Error(t, err, "rank 0 must listen on MASTER_ADDR only, not on every interface")
	}
	_, err := Rendezvous(rdvEnv(port, 1, 2), nil, 20*time.Second)
	require.NoError(t, err)
	require.NoError(t, (<-root).err)

	// IPv6 loopback, where the machine has it.
	l6, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Logf("no IPv6 loopback here (%v)", err)
		return
	}
	port = l6.Addr().(*net.TCPAddr).Port
	l6.Close()
	env := func(rank int) Env { e := rdvEnv(port, rank, 2); e.MasterAddr = "::1"; return e }
	root = goRendezvous(env(0), []byte("v6"), 20*time.Second)
	got, err := Rendezvous(env(1), nil, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, []byte("v6"), got)
	require.NoError(t, (<-root).err)
}

// TestRendezvousDuplicateRank: two processes of the job claiming one rank — the first
// keeps it, the second is told, and the job forms with the remaining rank.
func TestRendezvousDuplicateRank(t *testing.T) {
	port := freePort(t)
	root := goRendezvous(rdvEnv(port, 0, 3), []byte("id"), 20*time.Second)
	a := goRendezvous(rdvEnv(port, 1, 3), nil, 20*time.Second)
	b := goRendezvous(rdvEnv(port, 1, 3), nil, 20*time.Second)
	var first rdvResult
	var winner <-chan rdvResult
	select {
	case first = <-a:
		winner = b
	case first = <-b:
		winner = a
	}
	require.ErrorContains(t, first.err, "rank 1 is already taken")
	r2 := goRendezvous(rdvEnv(port, 2, 3), nil, 20*time.Second)
	for _, ch := range []<-chan rdvResult{root, winner, r2} {
		res := <-ch
		require.NoError(t, res.err)
		require.Equal(t, []byte("id"), res.blob)
	}
}

// TestRendezvousMismatches: a rank with the wrong token or world size gets a message
// that names the variable; a process on the port that is not this job's rank 0 is
// detected.
func TestRendezvousMismatches(t *testing.T) {
	port := freePort(t)
	root := goRendezvous(rdvEnv(port, 0, 2), []byte("id"), 20*time.Second)
	e := rdvEnv(port, 1, 2)
	e.JobToken = "another-job's-token-0123456789"
	_, err := Rendezvous(e, nil, 20*time.Second)
	require.ErrorContains(t, err, "rejected this rank's "+JobTokenEnv)
	_, err = Rendezvous(rdvEnv(port, 1, 3), nil, 20*time.Second)
	require.ErrorContains(t, err, "WORLD_SIZE=3")
	_, err = Rendezvous(rdvEnv(port, 1, 2), nil, 20*time.Second)
	require.NoError(t, err)
	require.NoError(t, (<-root).err)

	// A fake rank 0 that accepts any hello and sends bytes it could not have sealed.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write(append([]byte(rendezvousMagic), make([]byte, rdvNonceLen)...))
		io.ReadFull(c, make([]byte, rdvHelloLen))
		c.Write(append([]byte{rdvOK, 40, 0, 0, 0}, make([]byte, 40)...))
		io.ReadAll(c)
	}()
	_, err = Rendezvous(rdvEnv(ln.Addr().(*net.TCPAddr).Port, 1, 2), nil, 10*time.Second)
	require.ErrorContains(t, err, "does not hold this job's "+JobTokenEnv)
}

// TestRendezvousBusy: with more silent connections than rank 0 handshakes at once,
// the extra ones are closed at once and a real rank dials again until it gets in.
func TestRendezvousBusy(t *testing.T) {
	oldT, oldP := rdvHelloTimeout, rdvMaxPending
	rdvHelloTimeout, rdvMaxPending = 300*time.Millisecond, 2
	defer func() { rdvHelloTimeout, rdvMaxPending = oldT, oldP }()
	port := freePort(t)
	root := goRendezvous(rdvEnv(port, 0, 2), []byte("id"), 20*time.Second)
	var held []net.Conn
	for range 6 {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err != nil {
			var op *net.OpError
			require.True(t, errors.As(err, &op), "%v", err)
			time.Sleep(20 * time.Millisecond)
			continue
		}
		held = append(held, c)
	}
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	res, err := Rendezvous(rdvEnv(port, 1, 2), nil, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, []byte("id"), res)
	require.NoError(t, (<-root).err)
}
