package localnode

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Slots is how many nodes can run on one machine at once.
const Slots = 64

// lockDir holds a lock file per slot; on tmpfs, so a reboot frees every slot.
const lockDir = "/run/trellis-node"

// Slot is a node's share of the machine: networks and names that no other node uses while the slot is held.
type Slot struct {
	Index int
	// PodCIDR is the node's pod network, also the seed's pods network.
	PodCIDR netip.Prefix
	// ServiceCIDR is the seed's service network (kube-apiserver --service-cluster-ip-range).
	ServiceCIDR netip.Prefix
	// NodeCIDR is the link between host and node; HostIP is the host's end, NodeIP the node's InternalIP.
	NodeCIDR       netip.Prefix
	HostIP, NodeIP netip.Addr
	// APIServiceIP is the ClusterIP of Service default/kubernetes, DNSIP that of kube-system/kube-dns.
	APIServiceIP, DNSIP netip.Addr

	lock *os.File
}

// Name is the node's name, and that of its network namespace and cgroup.
func (s *Slot) Name() string { return "trellis-node" + strconv.Itoa(s.Index) }

// HostVeth is the host's end of the node's link.
func (s *Slot) HostVeth() string { return "trln" + strconv.Itoa(s.Index) }

// Bridge is the CNI bridge in the node's network namespace.
func (s *Slot) Bridge() string { return "trlbr" + strconv.Itoa(s.Index) }

// StateDir is the node's disk state: containerd's content and snapshots, kubelet's root, volumes.
func (s *Slot) StateDir() string { return "/var/lib/" + s.Name() }

// RunDir is the node's runtime state: sockets, containerd's state, pods' network namespaces, CNI state.
func (s *Slot) RunDir() string { return "/run/" + s.Name() }

// containerdRoot is the root directory of the slot's containerd (its content, snapshots and metadata).
func containerdRoot(s *Slot) string { return filepath.Join(s.StateDir(), "containerd") }

// ShimSocketDir is where the node's containerd shims put their sockets (containerd's socket_dir), inside RunDir.
func (s *Slot) ShimSocketDir() string { return filepath.Join(s.RunDir(), "s") }

// NetNSPath is the node's network namespace, as `ip netns` names it.
func (s *Slot) NetNSPath() string { return netnsPath(s.Name()) }

func newSlot(i int) *Slot {
	s := &Slot{Index: i}
	s.PodCIDR = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 224, byte(4 * i), 0}), 22)
	s.ServiceCIDR = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 225, byte(4 * i), 0}), 22)
	s.NodeCIDR = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 226, byte(i), 0}), 30)
	s.HostIP = netip.AddrFrom4([4]byte{10, 226, byte(i), 1})
	s.NodeIP = netip.AddrFrom4([4]byte{10, 226, byte(i), 2})
	s.APIServiceIP = netip.AddrFrom4([4]byte{10, 225, byte(4 * i), 1})
	s.DNSIP = netip.AddrFrom4([4]byte{10, 225, byte(4 * i), 10})
	return s
}

// Reserve takes slot prefer if it is free (a restarted seed keeps its networks; -1 for none), else the first free
// slot whose networks overlap no route of the machine, after removing what a node of a killed process left behind in
// it. Every other free slot with leftovers is cleaned too. The slot is held until Release (or the process's end).
func Reserve(prefer int) (*Slot, error) {
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return nil, err
	}
	routes, err := hostRoutes()
	if err != nil {
		return nil, err
	}
	order := make([]int, 0, Slots+1)
	if prefer >= 0 && prefer < Slots {
		order = append(order, prefer)
	}
	for i := range Slots {
		if i != prefer {
			order = append(order, i)
		}
	}
	var found *Slot
	for _, i := range order {
		s := newSlot(i)
		if found != nil && !s.hasState() {
			continue
		}
		if ok, err := s.tryLock(); err != nil {
			return nil, err
		} else if !ok {
			continue // held by a running node
		}
		if err := s.cleanup(); err != nil {
			s.unlock()
			return nil, fmt.Errorf("slot %d: remove the state of an earlier node: %w", i, err)
		}
		if found != nil || s.overlaps(routes) {
			s.unlock()
			continue
		}
		found = s
	}
	if found == nil {
		return nil, fmt.Errorf("no free node slot of %d (held by running nodes or overlapping the machine's routes)", Slots)
	}
	return found, nil
}

// Release gives the slot up; Stop calls it after removing the node's state.
func (s *Slot) Release() { s.unlock() }

func (s *Slot) tryLock() (bool, error) {
	f, ok, err := tryLockFile(filepath.Join(lockDir, strconv.Itoa(s.Index)+".lock"))
	if ok {
		s.lock = f
	}
	return ok, err
}

// tryLockFile takes an exclusive lock on the file at path (created if missing) unless another open file holds it;
// closing the returned file gives the lock back, and so does the process's end.
func tryLockFile(path string) (*os.File, bool, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return f, true, nil
}

func (s *Slot) unlock() {
	if s.lock != nil {
		_ = s.lock.Close()
		s.lock = nil
	}
}

// hasState reports whether anything of the slot's node exists on the machine.
func (s *Slot) hasState() bool {
	for _, p := range []string{s.StateDir(), s.RunDir(), s.NetNSPath(), "/sys/class/net/" + s.HostVeth()} {
		if _, err := os.Lstat(p); err == nil {
			return true
		}
	}
	for _, h := range cgroupHierarchies() {
		if _, err := os.Stat(filepath.Join(h, s.Name())); err == nil {
			return true
		}
	}
	return false
}

// overlaps reports whether one of the slot's networks overlaps a route of the machine that is not the slot's own.
func (s *Slot) overlaps(routes []route) bool {
	for _, r := range routes {
		if r.dev == s.HostVeth() {
			continue
		}
		for _, p := range []netip.Prefix{s.PodCIDR, s.ServiceCIDR, s.NodeCIDR} {
			if r.prefix.Bits() > 0 && r.prefix.Overlaps(p) {
				return true
			}
		}
	}
	return false
}

type route struct {
	dev    string
	prefix netip.Prefix
}

// hostRoutes reads the IPv4 routes of the host's network namespace from /proc/net/route.
func hostRoutes() ([]route, error) {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseRoutes(f)
}

// parseRoutes reads the format of /proc/net/route: a header, then interface, destination, gateway, flags, refcount,
// use, metric and mask, addresses in host byte order hex.
func parseRoutes(r io.Reader) ([]route, error) {
	var routes []route
	sc := bufio.NewScanner(r)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 {
			continue
		}
		dst, err1 := strconv.ParseUint(fields[1], 16, 32)
		mask, err2 := strconv.ParseUint(fields[7], 16, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("/proc/net/route: bad line %q", sc.Text())
		}
		var d, m [4]byte
		binary.LittleEndian.PutUint32(d[:], uint32(dst))
		binary.LittleEndian.PutUint32(m[:], uint32(mask))
		bits := 0
		for _, b := range m {
			for ; b&0x80 != 0; b <<= 1 {
				bits++
			}
		}
		routes = append(routes, route{dev: fields[0], prefix: netip.PrefixFrom(netip.AddrFrom4(d), bits).Masked()})
	}
	return routes, sc.Err()
}

// SlotAt returns slot i's networks and names without reserving it: for looking at what a node of that slot left
// (Leftovers).
func SlotAt(i int) *Slot { return newSlot(i) }

// leftoversOfFreed lists what a stopped node left in slot i, looked at while holding the slot: once a node has
// released its slot, another node (of another test, another package) may take it at once, and its processes and
// mounts are not the stopped node's leftovers. held is false when another node still holds the slot after a few tries
// (another Reserve looks at free slots briefly): the slot was taken again, and the Stop that released it had already
// checked it (Node.Stop fails on leftovers, looked at before its release). A /run/netns left mounted without a
// namespace in it counts too (removeNetNS).
func leftoversOfFreed(i int) (left []string, held bool, err error) {
	s := newSlot(i)
	for try := 0; ; try++ {
		ok, err := s.tryLock()
		if err != nil {
			return nil, false, err
		}
		if ok {
			break
		}
		if try == 40 {
			return nil, false, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer s.unlock()
	return append(s.Leftovers(), strayNetNS()...), true, nil
}

// Reporter is what CheckFreed reports to: a *testing.T.
type Reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
}

// CheckFreed reports an error for whatever the stopped node `what` left in slot i (leftoversOfFreed), and logs that
// it could not look when another node holds the slot.
func CheckFreed(r Reporter, what string, i int) {
	r.Helper()
	left, held, err := leftoversOfFreed(i)
	switch {
	case err != nil:
		r.Errorf("%s: %v", what, err)
	case !held:
		r.Logf("%s: slot %d is another node's now (the node's Stop checked it before releasing it)", what, i)
	case len(left) > 0:
		r.Errorf("%s left on this machine: %v", what, left)
	}
}
