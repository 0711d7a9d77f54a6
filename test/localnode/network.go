package localnode

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// setupNetwork creates the node's network namespace and its link to the host: a veth pair (HostVeth on the host with
// HostIP, eth0 in the namespace with NodeIP and a default route to the host), host routes to the node's pod and
// service networks through the link, and, inside the namespace only, IP forwarding and iptables on bridged traffic
// (kube-proxy's ClusterIPs need both). The host's own sysctls are not touched.
func setupNetwork(s *Slot) error {
	ns := s.Name()
	link := s.NodeCIDR.Bits()
	if err := addNetNS(ns); err != nil {
		return err
	}
	steps := [][]string{
		{"ip", "link", "add", s.HostVeth(), "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"ip", "addr", "add", fmt.Sprintf("%s/%d", s.HostIP, link), "dev", s.HostVeth()},
		{"ip", "link", "set", s.HostVeth(), "up"},
		{"ip", "-n", ns, "addr", "add", fmt.Sprintf("%s/%d", s.NodeIP, link), "dev", "eth0"},
		{"ip", "-n", ns, "link", "set", "eth0", "up"},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
		{"ip", "-n", ns, "route", "add", "default", "via", s.HostIP.String()},
		{"ip", "route", "add", s.PodCIDR.String(), "via", s.NodeIP.String(), "dev", s.HostVeth()},
		{"ip", "route", "add", s.ServiceCIDR.String(), "via", s.NodeIP.String(), "dev", s.HostVeth()},
		{"ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"},
		{"ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=1"},
		{"ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.bridge.bridge-nf-call-ip6tables=1"},
	}
	return runSteps(steps)
}

// setupMachineNetwork creates a machine's network namespace and its link to the network namespace of the seed's node
// (parent): a veth pair (HostVeth in parent with HostIP, eth0 in the machine's namespace with NodeIP and a default
// route to parent), a route in parent to the machine's pod network, and, inside the machine's namespace only, IP
// forwarding and iptables on bridged traffic. Deleting the machine's namespace takes the veth pair and parent's route
// with it. The host's sysctls are not touched; the host gets one route, to the machine's link through parent's (the
// answers of what listens on parent's HostIP, like the landscape's hub forwarder, to the machine's pods, which leave
// the machine masqueraded as its NodeIP); the machine's cleanup removes it (removeMachineHostRoute), and parent's
// veth takes it with it.
func setupMachineNetwork(s, parent *Slot) error {
	ns, pns := s.Name(), parent.Name()
	link := s.NodeCIDR.Bits()
	if err := addNetNS(ns); err != nil {
		return err
	}
	steps := [][]string{
		{"ip", "-n", pns, "link", "add", s.HostVeth(), "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"ip", "-n", pns, "addr", "add", fmt.Sprintf("%s/%d", s.HostIP, link), "dev", s.HostVeth()},
		{"ip", "-n", pns, "link", "set", s.HostVeth(), "up"},
		{"ip", "-n", ns, "addr", "add", fmt.Sprintf("%s/%d", s.NodeIP, link), "dev", "eth0"},
		{"ip", "-n", ns, "link", "set", "eth0", "up"},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
		{"ip", "-n", ns, "route", "add", "default", "via", s.HostIP.String()},
		{"ip", "-n", pns, "route", "add", s.PodCIDR.String(), "via", s.NodeIP.String(), "dev", s.HostVeth()},
		{"ip", "route", "replace", s.NodeCIDR.String(), "via", parent.NodeIP.String(), "dev", parent.HostVeth()},
		{"ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"},
		{"ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=1"},
		{"ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.bridge.bridge-nf-call-ip6tables=1"},
	}
	return runSteps(steps)
}

// removeMachineHostRoute removes the host's route to a machine's link (setupMachineNetwork): a route to the slot's
// NodeCIDR through another device than the slot's own veth. None is nothing to do.
func removeMachineHostRoute(s *Slot) error {
	routes, err := hostRoutes()
	if err != nil {
		return err
	}
	for _, r := range routes {
		if r.prefix == s.NodeCIDR && r.dev != s.HostVeth() {
			if out, err := exec.Command("ip", "route", "del", s.NodeCIDR.String(), "dev", r.dev).CombinedOutput(); err != nil {
				return fmt.Errorf("ip route del %s dev %s: %v: %s", s.NodeCIDR, r.dev, err, strings.TrimSpace(string(out)))
			}
		}
	}
	return nil
}

// runSteps runs commands in order, stopping at the first that fails.
// netnsDir is where `ip netns` keeps named network namespaces. The first `ip netns add` on a machine creates it and
// bind-mounts it onto itself (a shared mount, so that the namespaces' own mounts propagate); removeNetNS takes both
// away with the last namespace.
const netnsDir = "/run/netns"

// netnsPath is the file of the named network namespace name.
func netnsPath(name string) string { return filepath.Join(netnsDir, name) }

// addNetNS creates the network namespace name (`ip netns add`), holding the machine's netns lock, so that no other
// node's teardown unmounts netnsDir meanwhile.
func addNetNS(name string) error {
	return withNetNSLock(func() error { return runSteps([][]string{{"ip", "netns", "add", name}}) })
}

// removeNetNS deletes the network namespace name (`ip netns delete`) and, when no named namespace is left, the mount
// and the directory that `ip netns add` made of netnsDir, holding the machine's netns lock.
func removeNetNS(name string) error {
	return withNetNSLock(func() error {
		if _, err := os.Lstat(netnsPath(name)); err == nil {
			if err := runSteps([][]string{{"ip", "netns", "delete", name}}); err != nil {
				return err
			}
		}
		if entries, err := os.ReadDir(netnsDir); err != nil || len(entries) > 0 {
			return nil // absent, or other namespaces live there
		}
		for range 4 { // `ip netns add` bind-mounts it once; a mount made twice is unmounted twice
			if !netnsDirMounted() {
				break
			}
			if err := syscall.Unmount(netnsDir, syscall.MNT_DETACH); err != nil {
				return fmt.Errorf("unmount %s: %w", netnsDir, err)
			}
		}
		if err := syscall.Rmdir(netnsDir); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) {
			return fmt.Errorf("remove %s: %w", netnsDir, err)
		}
		return nil
	})
}

// strayNetNS reports netnsDir when it is left mounted with no namespace in it, which removeNetNS prevents.
func strayNetNS() []string {
	var left []string
	_ = withNetNSLock(func() error {
		if entries, err := os.ReadDir(netnsDir); err == nil && len(entries) == 0 && netnsDirMounted() {
			left = append(left, "mount "+netnsDir+" with no namespace in it")
		}
		return nil
	})
	return left
}

// netnsDirMounted reports whether netnsDir is a mount point.
func netnsDirMounted() bool {
	return slices.ContainsFunc(mounts(), func(m mount) bool { return m.point == netnsDir })
}

// withNetNSLock runs f holding an exclusive lock on netns.lock in lockDir, across processes.
func withNetNSLock(f func() error) error {
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return err
	}
	lf, err := os.OpenFile(filepath.Join(lockDir, "netns.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", lf.Name(), err)
	}
	return f()
}

func runSteps(steps [][]string) error {
	for _, step := range steps {
		if out, err := exec.Command(step[0], step[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(step, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// Forwarder passes TCP connections from the host's end of the node's link to a server on host loopback: the seed's
// kube-apiserver, so that the node's processes and pods (through Service default/kubernetes, whose endpoint is the
// apiserver's advertise address, HostIP) reach it without the apiserver listening anywhere but loopback; and, for
// the local landscape, the hub's agent port, which the agent's pod dials at HostIP.
type Forwarder struct {
	ln   net.Listener
	addr string // host:port it listens on
	wg   sync.WaitGroup
	mu   sync.Mutex
	open map[net.Conn]struct{}
}

// StartForwarder listens on host:<server's port> and forwards every connection to server (a URL, e.g.
// https://127.0.0.1:6443, or host:port). Close stops it.
func StartForwarder(server, host string) (*Forwarder, error) {
	if !strings.Contains(server, "://") {
		server = "tcp://" + server
	}
	u, err := url.Parse(server)
	if err != nil {
		return nil, err
	}
	target := u.Host
	ln, err := net.Listen("tcp", net.JoinHostPort(host, u.Port()))
	if err != nil {
		return nil, err
	}
	f := &Forwarder{ln: ln, addr: ln.Addr().String(), open: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed
			}
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				f.pass(c, target)
			}()
		}
	}()
	return f, nil
}

func (f *Forwarder) track(c net.Conn, add bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if add {
		if f.open == nil {
			return false // closed
		}
		f.open[c] = struct{}{}
	} else {
		delete(f.open, c)
	}
	return true
}

func (f *Forwarder) pass(c net.Conn, target string) {
	defer c.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	if !f.track(c, true) || !f.track(up, true) {
		return
	}
	defer f.track(c, false)
	defer f.track(up, false)
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok && (err == nil || errors.Is(err, net.ErrClosed)) {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
	<-done
}

// Addr is the address the forwarder listens on, host:port.
func (f *Forwarder) Addr() string { return f.addr }

// Close stops accepting, closes every forwarded connection and waits for their goroutines.
func (f *Forwarder) Close() {
	_ = f.ln.Close()
	f.mu.Lock()
	for c := range f.open {
		_ = c.Close()
	}
	f.open = nil
	f.mu.Unlock()
	f.wg.Wait()
}
