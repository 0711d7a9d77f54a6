package localnode

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupHierarchies returns the mount points of the machine's cgroup hierarchies (v1 controllers, the named systemd
// hierarchy, the unified one).
func cgroupHierarchies() []string {
	var hs []string
	for _, m := range mounts() {
		if m.fstype == "cgroup" || m.fstype == "cgroup2" {
			hs = append(hs, m.point)
		}
	}
	return hs
}

// createCgroups creates the node's cgroup (kubelet's cgroupRoot, which must exist) in every hierarchy; a cpuset
// cgroup starts with no CPUs and memory nodes, so it gets its parent's.
func (s *Slot) createCgroups() error {
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, s.Name())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("cgroup %s: %s: %w", dir, f, err)
				}
			}
		}
	}
	return nil
}

type mount struct{ point, fstype string }

// mounts returns the mounts of this process's mount namespace, from /proc/self/mountinfo.
func mounts() []mount {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	return parseMountinfo(f)
}

// parseMountinfo reads mountinfo lines (proc(5)); malformed lines are skipped.
func parseMountinfo(r io.Reader) []mount {
	var ms []mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mount-point options [optional...] - fstype source super-options
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		ms = append(ms, mount{point: unescapeMount(fields[4]), fstype: fields[sep+1]})
	}
	return ms
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// under reports whether p is dir or inside it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// Leftovers lists what of the slot's node exists on the machine: processes, mounts, cgroups, the network namespace,
// the host's veth, a machine's host route, directories, links in /var/log/containers. Empty after Stop.
func (s *Slot) Leftovers() []string {
	var left []string
	for _, pid := range s.processes() {
		left = append(left, fmt.Sprintf("process %d", pid))
	}
	for _, m := range mounts() {
		if under(m.point, s.StateDir()) || under(m.point, s.RunDir()) || m.point == s.NetNSPath() {
			left = append(left, "mount "+m.point)
		}
	}
	for _, h := range cgroupHierarchies() {
		if _, err := os.Stat(filepath.Join(h, s.Name())); err == nil {
			left = append(left, "cgroup "+filepath.Join(h, s.Name()))
		}
	}
	for _, p := range []string{s.StateDir(), s.RunDir(), s.NetNSPath(), "/sys/class/net/" + s.HostVeth()} {
		if _, err := os.Lstat(p); err == nil {
			left = append(left, p)
		}
	}
	if routes, err := hostRoutes(); err == nil {
		for _, r := range routes {
			if r.prefix == s.NodeCIDR && r.dev != s.HostVeth() {
				left = append(left, "host route "+r.prefix.String()+" dev "+r.dev)
			}
		}
	}
	left = append(left, s.containerLogLinks()...)
	return left
}

// processes returns the processes that belong to the node: in its cgroups (pods) or in its network namespace
// (containerd, its shims, kubelet, kube-proxy, host-network containers).
func (s *Slot) processes() []int {
	pids := map[int]bool{}
	for _, h := range cgroupHierarchies() {
		root := filepath.Join(h, s.Name())
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids[pid] = true
				}
			}
			return nil
		})
	}
	var nsIno uint64
	if fi, err := os.Stat(s.NetNSPath()); err == nil {
		nsIno = fi.Sys().(*syscall.Stat_t).Ino
	}
	if nsIno != 0 {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if fi, err := os.Stat(filepath.Join("/proc", e.Name(), "ns", "net")); err == nil &&
				fi.Sys().(*syscall.Stat_t).Ino == nsIno {
				pids[pid] = true
			}
		}
	}
	delete(pids, os.Getpid())
	out := make([]int, 0, len(pids))
	for pid := range pids {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// containerLogLinks returns kubelet's links in /var/log/containers (a fixed directory) that point into the node's
// state.
func (s *Slot) containerLogLinks() []string {
	entries, _ := os.ReadDir("/var/log/containers")
	var links []string
	for _, e := range entries {
		p := filepath.Join("/var/log/containers", e.Name())
		if target, err := os.Readlink(p); err == nil && under(target, s.StateDir()) {
			links = append(links, p)
		}
	}
	return links
}

// cleanup removes everything of the slot's node from the machine, in an order that lets each step succeed: processes
// (until none is left), mounts (deepest first), cgroups (leaves first), the network namespace (which takes the veth
// pair, the bridge and the node's iptables rules with it), the directories and log links.
func (s *Slot) cleanup() error {
	if !s.hasState() && len(s.containerLogLinks()) == 0 {
		return nil
	}
	var errs []error
	deadline := time.Now().Add(15 * time.Second)
	for {
		pids := s.processes()
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			errs = append(errs, fmt.Errorf("processes %v survive SIGKILL", pids))
			break
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var points []string
	for _, m := range mounts() {
		if under(m.point, s.StateDir()) || under(m.point, s.RunDir()) {
			points = append(points, m.point)
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	for _, p := range slices.Compact(points) {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) &&
			!errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	for _, h := range cgroupHierarchies() {
		if err := removeCgroup(filepath.Join(h, s.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeNetNS(s.Name()); err != nil {
		errs = append(errs, err)
	}
	if err := removeMachineHostRoute(s); err != nil {
		errs = append(errs, err)
	}
	// Deleting the namespace takes the veth pair with it, asynchronously; a veth whose peer is elsewhere (a namespace
	// deleted before a crash) is deleted here.
	veth := "/sys/class/net/" + s.HostVeth()
	for i := 0; i < 40; i++ {
		if _, err := os.Lstat(veth); err != nil {
			break
		}
		if i == 20 {
			if out, err := exec.Command("ip", "link", "delete", s.HostVeth()).CombinedOutput(); err != nil {
				if _, statErr := os.Lstat(veth); statErr == nil {
					errs = append(errs, fmt.Errorf("ip link delete %s: %v: %s", s.HostVeth(), err, out))
					break
				}
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	for _, d := range []string{s.StateDir(), s.RunDir()} {
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	for _, l := range s.containerLogLinks() {
		if err := os.Remove(l); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeCgroup removes a cgroup directory tree, leaves first (a cgroup is removed with rmdir, and only when empty).
func removeCgroup(root string) error {
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		var err error
		for range 20 { // a just-killed task may still be leaving it
			if err = syscall.Rmdir(dirs[i]); err == nil || errors.Is(err, fs.ErrNotExist) {
				err = nil
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dirs[i], err))
		}
	}
	return errors.Join(errs...)
}

// HostKubeChains lists the KUBE-* chains of the host's own iptables (IPv4 and IPv6), where a node never writes (its
// kubelet and kube-proxy write in its network namespace): tests compare it before and after.
func HostKubeChains() ([]string, error) {
	var chains []string
	for _, cmd := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(cmd).Output()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cmd, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, ":KUBE-") {
				chains = append(chains, cmd+" "+strings.Fields(line)[0])
			}
		}
	}
	return chains, nil
}

// ResidentMemory sums the resident memory (VmRSS) of the node's processes (Leftovers' processes: its daemons, shims
// and pods), in bytes; shared pages count once per process.
func (s *Slot) ResidentMemory() int64 {
	var total int64
	for _, pid := range s.processes() {
		total += vmRSS(pid)
	}
	return total
}

// NATRules returns the nat table of the slot's network namespace (iptables-save -t nat): the Service rules of the
// kube-proxy that runs there (the seed's, or a shoot's on a machine), for tests.
func (s *Slot) NATRules() (string, error) {
	out, err := exec.Command("ip", "netns", "exec", s.Name(), "iptables-save", "-t", "nat").Output()
	if err != nil {
		return "", fmt.Errorf("iptables-save in %s: %w", s.Name(), err)
	}
	return string(out), nil
}

// ResidentMemoryOf sums the resident memory (VmRSS) of the slot's processes named name (their /proc/<pid>/comm), in
// bytes: one component's memory, e.g. kube-proxy or coredns on a machine.
func (s *Slot) ResidentMemoryOf(name string) int64 {
	var total int64
	for _, pid := range s.processes() {
		comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != name {
			continue
		}
		total += vmRSS(pid)
	}
	return total
}

// vmRSS is a process's resident memory in bytes; 0 when it is gone.
func vmRSS(pid int) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
