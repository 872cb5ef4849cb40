package dist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// Rendezvous over TCP: how processes that no MPI launcher connected find each other.
// Rank 0 listens on MASTER_PORT (all interfaces); every other rank dials
// MASTER_ADDR:MASTER_PORT, retrying until rank 0 listens, says who it is, and receives
// rank 0's blob — for NCCL, the 128-byte ncclUniqueId that ncclCommInitRank needs on
// every rank. The connections close once every rank has the blob.

const rendezvousMagic = "GAMPRDV1"

// Rendezvous shares root's blob with every rank of a world of size processes: rank 0
// passes the blob and listens on port (all interfaces), the others pass nil, dial
// addr:port and get the blob back. It fails after timeout.
func Rendezvous(addr string, port, rank, size int, blob []byte, timeout time.Duration) ([]byte, error) {
	if size < 1 || rank < 0 || rank >= size {
		return nil, fmt.Errorf("dist: rendezvous: rank %d outside a world of size %d", rank, size)
	}
	deadline := time.Now().Add(timeout)
	if rank == 0 {
		return blob, serveRendezvous(port, size, blob, deadline)
	}
	return dialRendezvous(net.JoinHostPort(addr, strconv.Itoa(port)), rank, size, deadline)
}

func serveRendezvous(port, size int, blob []byte, deadline time.Time) error {
	if size == 1 {
		return nil
	}
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return fmt.Errorf("dist: rendezvous: rank 0 cannot listen on port %d (set MASTER_PORT to a free port): %w", port, err)
	}
	defer ln.Close()
	if tl, ok := ln.(*net.TCPListener); ok {
		tl.SetDeadline(deadline)
	}
	seen := make([]bool, size)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for joined := 1; joined < size; {
		c, err := ln.Accept()
		if err != nil {
			return fmt.Errorf("dist: rendezvous: %d of %d ranks joined before the deadline: %w", joined, size, err)
		}
		c.SetDeadline(deadline)
		r, s, err := readHello(c)
		if err != nil || s != size || r <= 0 || r >= size || seen[r] {
			// A stray or misconfigured client: refuse it and keep waiting for the ranks.
			c.Close()
			continue
		}
		seen[r] = true
		conns = append(conns, c)
		joined++
	}
	msg := binary.LittleEndian.AppendUint32(nil, uint32(len(blob)))
	msg = append(msg, blob...)
	for _, c := range conns {
		if _, err := c.Write(msg); err != nil {
			return fmt.Errorf("dist: rendezvous: sending to a rank: %w", err)
		}
	}
	// Wait for every rank to confirm, so rank 0 does not tear down before they read.
	ack := make([]byte, 1)
	for _, c := range conns {
		if _, err := io.ReadFull(c, ack); err != nil {
			return fmt.Errorf("dist: rendezvous: waiting for a rank's acknowledgement: %w", err)
		}
	}
	return nil
}

func readHello(c net.Conn) (rank, size int, err error) {
	buf := make([]byte, len(rendezvousMagic)+8)
	if _, err := io.ReadFull(c, buf); err != nil {
		return 0, 0, err
	}
	if string(buf[:len(rendezvousMagic)]) != rendezvousMagic {
		return 0, 0, errors.New("not a gamp rendezvous client")
	}
	b := buf[len(rendezvousMagic):]
	return int(binary.LittleEndian.Uint32(b)), int(binary.LittleEndian.Uint32(b[4:])), nil
}

func dialRendezvous(addr string, rank, size int, deadline time.Time) ([]byte, error) {
	var c net.Conn
	var err error
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		c, err = net.DialTimeout("tcp", addr, time.Until(deadline))
		if err == nil {
			break
		}
		if time.Now().Add(wait).After(deadline) {
			return nil, fmt.Errorf("dist: rendezvous: rank %d cannot reach rank 0 at %s (check MASTER_ADDR, MASTER_PORT and the firewall): %w", rank, addr, err)
		}
		time.Sleep(wait)
	}
	defer c.Close()
	c.SetDeadline(deadline)
	hello := append([]byte(rendezvousMagic), binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, uint32(rank)), uint32(size))...)
	if _, err := c.Write(hello); err != nil {
		return nil, fmt.Errorf("dist: rendezvous: rank %d: %w", rank, err)
	}
	var n [4]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return nil, fmt.Errorf("dist: rendezvous: rank %d: no answer from rank 0 at %s (another job on the port, or a rank with another WORLD_SIZE?): %w", rank, addr, err)
	}
	blob := make([]byte, binary.LittleEndian.Uint32(n[:]))
	if _, err := io.ReadFull(c, blob); err != nil {
		return nil, fmt.Errorf("dist: rendezvous: rank %d: %w", rank, err)
	}
	if _, err := c.Write([]byte{1}); err != nil {
		return nil, fmt.Errorf("dist: rendezvous: rank %d: %w", rank, err)
	}
	return blob, nil
}
