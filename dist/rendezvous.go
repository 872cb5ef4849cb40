package dist

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Rendezvous over TCP: how processes that no MPI launcher connected find each other.
// Rank 0 listens on MASTER_ADDR:MASTER_PORT — only that address, never every
// interface — and every other rank dials it, retrying until rank 0 listens. A rank
// proves it belongs to the job without sending the job's token: rank 0 sends a fresh
// random nonce, the rank answers with its rank, the world size and
// HMAC-SHA256(token, nonces ‖ rank ‖ size). Once every rank has joined, rank 0 sends
// each its blob (for NCCL, the 128-byte ncclUniqueId that ncclCommInitRank needs)
// sealed with AES-GCM under a key derived from the token and that connection's nonces,
// so only a rank holding the token can read it, and a rank can tell the real rank 0
// from a stranger on the port.
//
// Each connection's handshake runs in its own goroutine with a short deadline, so a
// client that connects and says nothing, or says the wrong thing, neither delays the
// job nor takes a rank: only a hello with a valid MAC claims a rank, and the first
// such claim wins.
//
//	rank 0 → rank:  "GAMPRDV2" ‖ server nonce (32 bytes)
//	rank → rank 0:  "GAMPRDV2" ‖ rank (u32) ‖ size (u32) ‖ client nonce (32) ‖ MAC (32)
//	rank 0 → rank:  status (1 byte); when it is rdvOK, once every rank joined:
//	                length (u32) ‖ AES-256-GCM(blob)
//	rank → rank 0:  one byte, after reading the blob (rank 0 waits before closing)

// JobTokenEnv is the environment variable holding the job's secret token, which every
// rank of a job that meets over TCP (the NCCL backend) must share: gamprun generates
// a random one per job; a job started by hand sets the same value on every rank (for
// example GAMP_JOB_TOKEN=$(head -c 32 /dev/urandom | base64)).
const JobTokenEnv = "GAMP_JOB_TOKEN"

// MinJobTokenLen is the shortest job token Rendezvous accepts: a short token could be
// guessed offline from one observed handshake.
const MinJobTokenLen = 16

const (
	rendezvousMagic = "GAMPRDV2"
	rdvNonceLen     = 32
	rdvHelloLen     = len(rendezvousMagic) + 8 + rdvNonceLen + sha256.Size
	rdvMaxBlob      = 1 << 20

	// Status bytes rank 0 answers a hello with.
	rdvOK       byte = 0
	rdvBadToken byte = 1 // the MAC does not match: another job's token, or none
	rdvTaken    byte = 2 // another process of the job already holds this rank
	rdvBadWorld byte = 3 // the rank or world size disagrees with rank 0's
)

// Bounds on what an unauthenticated connection can cost rank 0. Variables so tests can
// lengthen the hello timeout and show that hellos are not read one after another.
var (
	// rdvHelloTimeout is how long rank 0 waits for a connection's hello; a real rank
	// sends it as soon as it reads rank 0's nonce.
	rdvHelloTimeout = 5 * time.Second
	// rdvMaxPending caps the handshakes in progress; a connection beyond it is closed
	// at once (its rank, if it is one, dials again).
	rdvMaxPending = 64
)

// Rendezvous shares rank 0's blob with every rank of the world env describes
// (env.Rank, env.Size, env.MasterAddr, env.MasterPort, env.JobToken, as ReadEnv fills
// them): rank 0 passes the blob and listens on MasterAddr:MasterPort, the others pass
// nil, dial it and get the blob back. Every rank needs the same job token (at least
// MinJobTokenLen bytes; gamprun sets GAMP_JOB_TOKEN); a world of one needs none. It
// fails after timeout.
func Rendezvous(env Env, blob []byte, timeout time.Duration) ([]byte, error) {
	if env.Size < 1 || env.Rank < 0 || env.Rank >= env.Size {
		return nil, fmt.Errorf("dist: rendezvous: rank %d outside a world of size %d", env.Rank, env.Size)
	}
	if env.Size == 1 {
		return blob, nil
	}
	if len(env.JobToken) < MinJobTokenLen {
		what := "is not set"
		if env.JobToken != "" {
			what = fmt.Sprintf("has %d bytes, fewer than %d", len(env.JobToken), MinJobTokenLen)
		}
		return nil, fmt.Errorf("dist: rendezvous: %s %s: start the job with gamprun, which generates a token per job, "+
			"or give every rank the same random value (for example %s=$(head -c 32 /dev/urandom | base64))", JobTokenEnv, what, JobTokenEnv)
	}
	if len(blob) > rdvMaxBlob {
		return nil, fmt.Errorf("dist: rendezvous: a blob of %d bytes is over the %d-byte limit", len(blob), rdvMaxBlob)
	}
	deadline := time.Now().Add(timeout)
	addr := net.JoinHostPort(env.MasterAddr, strconv.Itoa(env.MasterPort))
	if env.Rank == 0 {
		return blob, serveRendezvous(addr, env.Size, []byte(env.JobToken), blob, deadline)
	}
	return dialRendezvous(addr, env.Rank, env.Size, []byte(env.JobToken), deadline)
}

// helloMAC is what a rank sends to prove it holds the token; binding both nonces, the
// rank and the size means a recorded hello is worthless on any other connection.
func helloMAC(token, serverNonce, clientNonce []byte, rank, size int) []byte {
	m := hmac.New(sha256.New, token)
	m.Write([]byte("gamp rendezvous hello\x00"))
	m.Write(serverNonce)
	m.Write(clientNonce)
	m.Write(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, uint32(rank)), uint32(size)))
	return m.Sum(nil)
}

// blobCipher is the AEAD that seals the blob on one connection: its key is derived from
// the token and both nonces, so it is fresh per connection and a zero GCM nonce is safe.
func blobCipher(token, serverNonce, clientNonce []byte) cipher.AEAD {
	m := hmac.New(sha256.New, token)
	m.Write([]byte("gamp rendezvous blob key\x00"))
	m.Write(serverNonce)
	m.Write(clientNonce)
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return aead
}

// blobAAD ties the sealed blob to the rank and world it was sent to.
func blobAAD(rank, size int) []byte {
	return binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32([]byte(rendezvousMagic), uint32(rank)), uint32(size))
}

// rdvPeer is a rank whose hello carried a valid MAC.
type rdvPeer struct {
	rank int
	conn net.Conn
	aead cipher.AEAD
}

// rdvServer is rank 0's side: an accept loop, one handshake goroutine per connection,
// and the caller's goroutine collecting authenticated ranks.
type rdvServer struct {
	token    []byte
	size     int
	deadline time.Time
	joined   chan rdvPeer
	done     chan struct{}
	wg       sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]bool // every connection not yet closed, closed on return
}

func serveRendezvous(addr string, size int, token, blob []byte, deadline time.Time) error {
	host, _, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return fmt.Errorf("dist: rendezvous: MASTER_ADDR=%q would make rank 0 listen on every interface: "+
			"set it to the address the other ranks dial (127.0.0.1 when every rank is on this machine)", host)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("dist: rendezvous: rank 0 cannot listen on %s (MASTER_ADDR must be this machine's address; set MASTER_PORT to a free port): %w", addr, err)
	}
	if tl, ok := ln.(*net.TCPListener); ok {
		tl.SetDeadline(deadline)
	}
	s := &rdvServer{token: token, size: size, deadline: deadline, joined: make(chan rdvPeer), done: make(chan struct{}), conns: map[net.Conn]bool{}}
	acceptErr := make(chan error, 1)
	s.wg.Add(1)
	go s.accept(ln, acceptErr)
	defer func() {
		close(s.done)
		ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	}()

	peers := make([]*rdvPeer, size)
	for joined := 1; joined < size; {
		select {
		case p := <-s.joined:
			if peers[p.rank] != nil {
				// Two processes of the job claim one rank: a misconfigured job. The first
				// keeps it; the second is told why.
				s.reply(p.conn, rdvTaken)
				continue
			}
			peers[p.rank] = &p
			joined++
		case err := <-acceptErr:
			var missing []int
			for r := 1; r < size; r++ {
				if peers[r] == nil {
					missing = append(missing, r)
				}
			}
			return fmt.Errorf("dist: rendezvous: %d of %d ranks joined before the deadline (missing ranks %v; check that they run with the same %s, WORLD_SIZE, MASTER_ADDR and MASTER_PORT): %w",
				joined, size, missing, JobTokenEnv, err)
		}
	}
	ln.Close() // the world is complete: nobody else gets in
	for _, p := range peers[1:] {
		sealed := p.aead.Seal(nil, make([]byte, p.aead.NonceSize()), blob, blobAAD(p.rank, size))
		msg := append([]byte{rdvOK}, binary.LittleEndian.AppendUint32(nil, uint32(len(sealed)))...)
		if _, err := p.conn.Write(append(msg, sealed...)); err != nil {
			return fmt.Errorf("dist: rendezvous: sending to rank %d: %w", p.rank, err)
		}
	}
	// Wait for every rank to confirm, so rank 0 does not tear down before they read.
	ack := make([]byte, 1)
	for _, p := range peers[1:] {
		if _, err := io.ReadFull(p.conn, ack); err != nil {
			return fmt.Errorf("dist: rendezvous: waiting for rank %d's acknowledgement: %w", p.rank, err)
		}
	}
	return nil
}

// accept hands every connection to a handshake goroutine until the listener closes or
// its deadline passes.
func (s *rdvServer) accept(ln net.Listener, acceptErr chan<- error) {
	defer s.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			acceptErr <- err
			return
		}
		s.mu.Lock()
		busy := len(s.conns) >= rdvMaxPending+s.size
		select {
		case <-s.done:
			busy = true
		default:
		}
		if !busy {
			s.conns[c] = true
		}
		s.mu.Unlock()
		if busy {
			c.Close()
			continue
		}
		s.wg.Add(1)
		go s.handshake(c)
	}
}

// forget closes c and stops tracking it.
func (s *rdvServer) forget(c net.Conn) {
	c.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// reply sends a refusal status and closes c.
func (s *rdvServer) reply(c net.Conn, status byte) {
	c.SetWriteDeadline(time.Now().Add(rdvHelloTimeout))
	c.Write([]byte{status})
	s.forget(c)
}

// handshake authenticates one connection and, if its hello is valid, passes it to the
// collecting goroutine, which then owns it.
func (s *rdvServer) handshake(c net.Conn) {
	defer s.wg.Done()
	hd := time.Now().Add(rdvHelloTimeout)
	if s.deadline.Before(hd) {
		hd = s.deadline
	}
	c.SetDeadline(hd)
	nonce := make([]byte, rdvNonceLen)
	rand.Read(nonce)
	if _, err := c.Write(append([]byte(rendezvousMagic), nonce...)); err != nil {
		s.forget(c)
		return
	}
	hello := make([]byte, rdvHelloLen)
	if _, err := io.ReadFull(c, hello); err != nil || string(hello[:len(rendezvousMagic)]) != rendezvousMagic {
		s.forget(c) // silent, slow, or not a gamp rank
		return
	}
	b := hello[len(rendezvousMagic):]
	rank, size := int(binary.LittleEndian.Uint32(b)), int(binary.LittleEndian.Uint32(b[4:]))
	clientNonce, mac := b[8:8+rdvNonceLen], b[8+rdvNonceLen:]
	if !hmac.Equal(mac, helloMAC(s.token, nonce, clientNonce, rank, size)) {
		s.reply(c, rdvBadToken)
		return
	}
	if size != s.size || rank < 1 || rank >= s.size {
		s.reply(c, rdvBadWorld)
		return
	}
	c.SetDeadline(s.deadline)
	select {
	case s.joined <- rdvPeer{rank: rank, conn: c, aead: blobCipher(s.token, nonce, clientNonce)}:
	case <-s.done:
		s.forget(c)
	}
}

// errRetry marks a connection that closed before rank 0's greeting: rank 0 was busy
// (too many handshakes) or something else held the port for a moment; dial again.
var errRetry = errors.New("closed before rank 0's greeting")

func dialRendezvous(addr string, rank, size int, token []byte, deadline time.Time) ([]byte, error) {
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		c, err := net.DialTimeout("tcp", addr, time.Until(deadline))
		if err == nil {
			var blob []byte
			blob, err = joinRendezvous(c, addr, rank, size, token, deadline)
			c.Close()
			if !errors.Is(err, errRetry) {
				return blob, err
			}
		}
		if time.Now().Add(wait).After(deadline) {
			return nil, fmt.Errorf("dist: rendezvous: rank %d cannot reach rank 0 at %s (check MASTER_ADDR, MASTER_PORT and the firewall): %w", rank, addr, err)
		}
		time.Sleep(wait)
	}
}

// joinRendezvous runs a rank's side of the handshake on c.
func joinRendezvous(c net.Conn, addr string, rank, size int, token []byte, deadline time.Time) ([]byte, error) {
	c.SetDeadline(deadline)
	greeting := make([]byte, len(rendezvousMagic)+rdvNonceLen)
	if n, err := io.ReadFull(c, greeting); err != nil {
		if n == 0 && (errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err)) {
			return nil, errRetry
		}
		return nil, fmt.Errorf("dist: rendezvous: rank %d: no greeting from rank 0 at %s: %w", rank, addr, err)
	}
	if string(greeting[:len(rendezvousMagic)]) != rendezvousMagic {
		return nil, fmt.Errorf("dist: rendezvous: rank %d: %s is not a gamp rendezvous (another program on MASTER_PORT, or another gamp version?)", rank, addr)
	}
	serverNonce := greeting[len(rendezvousMagic):]
	clientNonce := make([]byte, rdvNonceLen)
	rand.Read(clientNonce)
	hello := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32([]byte(rendezvousMagic), uint32(rank)), uint32(size))
	hello = append(hello, clientNonce...)
	hello = append(hello, helloMAC(token, serverNonce, clientNonce, rank, size)...)
	if _, err := c.Write(hello); err != nil {
		return nil, fmt.Errorf("dist: rendezvous: rank %d: %w", rank, err)
	}
	var head [5]byte
	if _, err := io.ReadFull(c, head[:1]); err != nil {
		return nil, fmt.Errorf("dist: rendezvous: rank %d: no answer from rank 0 at %s before the deadline (are all %d ranks started?): %w", rank, addr, size, err)
	}
	switch head[0] {
	case rdvOK:
	case rdvBadToken:
		return nil, fmt.Errorf("dist: rendezvous: rank %d: rank 0 at %s rejected this rank's %s: every rank of a job needs the same token (gamprun hands one to its ranks)", rank, addr, JobTokenEnv)
	case rdvTaken:
		return nil, fmt.Errorf("dist: rendezvous: rank %d is already taken at %s: another process of this job runs with RANK=%d", rank, addr, rank)
	case rdvBadWorld:
		return nil, fmt.Errorf("dist: rendezvous: rank %d: rank 0 at %s runs a world of another size than WORLD_SIZE=%d", rank, addr, size)
	default:
		return nil, fmt.Errorf("dist: rendezvous: rank %d: rank 0 at %s answered status %d", rank, addr, head[0])
	}
	if _, err := io.ReadFull(c, head[1:]); err != nil {
		return nil, fmt.Errorf("dist: rendezvous: rank %d: %w", rank, err)
	}
	n := binary.LittleEndian.Uint32(head[1:])
	if n > rdvMaxBlob+64 {
		return nil, fmt.Errorf("dist: rendezvous: rank %d: rank 0 at %s announced %d bytes, more than a rendezvous sends", rank, addr, n)
	}
	sealed := make([]byte, n)
	if _, err := io.ReadFull(c, sealed); err != nil {
		return nil, fmt.Errorf("dist: rendezvous: rank %d: %w", rank, err)
	}
	aead := blobCipher(token, serverNonce, clientNonce)
	blob, err := aead.Open(nil, make([]byte, aead.NonceSize()), sealed, blobAAD(rank, size))
	if err != nil {
		return nil, fmt.Errorf("dist: rendezvous: rank %d: the process at %s does not hold this job's %s (not this job's rank 0)", rank, addr, JobTokenEnv)
	}
	if _, err := c.Write([]byte{1}); err != nil {
		return nil, fmt.Errorf("dist: rendezvous: rank %d: %w", rank, err)
	}
	return blob, nil
}

// isReset reports a connection reset by the peer.
func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }
