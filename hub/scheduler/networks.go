package scheduler

import (
	"fmt"
	"net"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
)

// Ranges Gardener reserves for the VPN between seed and shoot; no shoot network may intersect them.
var reservedRanges = []struct {
	net  *net.IPNet
	what string
}{
	{mustCIDR("fd8f:6d53:b97a:1::/96"), "default vpn network (fd8f:6d53:b97a:1::/96)"},
	{mustCIDR("240.0.0.0/8"), "reserved kube-apiserver mapping range (240.0.0.0/8)"},
	{mustCIDR("241.0.0.0/8"), "reserved seed pod network mapping range (241.0.0.0/8)"},
	{mustCIDR("242.0.0.0/8"), "reserved shoot node network mapping range (242.0.0.0/8)"},
	{mustCIDR("243.0.0.0/8"), "reserved shoot service network mapping range (243.0.0.0/8)"},
	{mustCIDR("244.0.0.0/8"), "reserved shoot pod network mapping range (244.0.0.0/8)"},
}

func mustCIDR(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}

// networkConflicts returns why the shoot's networks may not run on the seed (Gardener's networksAreDisjointed), in
// Gardener's words; none when they may. The shoot's pods and services default to the seed's shootDefaults of the
// shoot's IP family when unset. Overlaps with the seed's own networks matter only for shoots with a highly
// available VPN or IPv6 networks (others reach the seed through the mapped ranges); the reserved ranges always
// matter, and a shoot needs services and, with workers, pods from somewhere.
func networkConflicts(seed *corev1beta1.Seed, shoot *corev1beta1.Shoot) []string {
	nw := shoot.GetSpec().GetNetworking()
	sn := seed.GetSpec().GetNetworks()
	pods, services := nw.Pods, nw.Services
	workerless := len(shoot.GetSpec().GetProvider().GetWorkers()) == 0
	families := nw.GetIpFamilies()
	if len(families) == 0 {
		families = []string{"IPv4"} // Gardener's default
	}
	if d := sn.GetShootDefaults(); d != nil {
		if pods == nil && !workerless && d.Pods != nil && familyMatches(d.GetPods(), families) {
			pods = d.Pods
		}
		if services == nil && d.Services != nil && familyMatches(d.GetServices(), families) {
			services = d.Services
		}
	}
	allowOverlap := !haVPN(shoot)
	one := func(s *string) []string {
		if s == nil {
			return nil
		}
		return []string{*s}
	}
	var errs field.ErrorList
	check := func(networks []string, kind string, required bool) {
		errs = append(errs, overlapWithSeed(networks, kind, required, allowOverlap, sn)...)
	}
	check(one(nw.Nodes), "node", false)
	check(one(services), "service", true)
	check(one(pods), "pod", !workerless)
	if st := shoot.GetStatus().GetNetworking(); st != nil {
		check(st.GetNodes(), "node", false)
		check(st.GetServices(), "service", true)
		check(st.GetPods(), "pod", !workerless)
	}
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.ErrorBody())
	}
	return msgs
}

// overlapWithSeed is Gardener's validateOverlapWithSeed for the networks of one kind.
func overlapWithSeed(networks []string, kind string, required, allowOverlap bool, sn *corev1beta1.SeedNetworks) field.ErrorList {
	var errs field.ErrorList
	p := field.NewPath(kind + "s")
	for _, n := range networks {
		_, shootNet, err := net.ParseCIDR(n)
		if !allowOverlap || (err == nil && shootNet.IP.To4() == nil) {
			for _, s := range []struct {
				cidr *string
				what string
			}{{&sn.Services, "service"}, {&sn.Pods, "pod"}, {sn.Nodes, "node"}} {
				// An unset seed network intersects nothing (Gardener's seeds always have pods and services).
				if s.cidr != nil && *s.cidr != "" && intersect(*s.cidr, n) {
					errs = append(errs, field.Invalid(p, n, fmt.Sprintf("shoot %s network intersects with seed %s network", kind, s.what)))
				}
			}
		}
		for _, r := range reservedRanges {
			// As in Gardener, a network that does not parse intersects everything.
			if err != nil || overlaps(r.net, shootNet) {
				errs = append(errs, field.Invalid(p, n, fmt.Sprintf("shoot %s network intersects with %s", kind, r.what)))
			}
		}
	}
	if len(networks) == 0 && required {
		errs = append(errs, field.Required(p, kind+"s is required"))
	}
	return errs
}

// intersect is Gardener's NetworksIntersect: whether either network contains the other's first address. As there,
// a network that does not parse counts as intersecting, so that a malformed shoot network is never accepted.
func intersect(a, b string) bool {
	_, na, err1 := net.ParseCIDR(a)
	_, nb, err2 := net.ParseCIDR(b)
	if err1 != nil || err2 != nil {
		return true
	}
	return overlaps(na, nb)
}

func overlaps(a, b *net.IPNet) bool { return a.Contains(b.IP) || b.Contains(a.IP) }

func isIPv6(cidr string) bool {
	_, n, err := net.ParseCIDR(cidr)
	return err == nil && n.IP.To4() == nil
}

func isIPv4(cidr string) bool {
	_, n, err := net.ParseCIDR(cidr)
	return err == nil && n.IP.To4() != nil
}

// familyMatches reports whether a seed's default network may serve a shoot of these IP families.
func familyMatches(cidr string, families []string) bool {
	return (isIPv6(cidr) && slices.Contains(families, "IPv6")) || (isIPv4(cidr) && slices.Contains(families, "IPv4"))
}

// haVPN is Gardener's IsHAVPNEnabled: a highly available control plane, unless the annotation says otherwise.
func haVPN(shoot *corev1beta1.Shoot) bool {
	ha := shoot.GetSpec().GetControlPlane().GetHighAvailability() != nil
	if v, err := strconv.ParseBool(shoot.GetMetadata().GetAnnotations()[AnnotationHAVPN]); err == nil {
		ha = v
	}
	return ha
}
