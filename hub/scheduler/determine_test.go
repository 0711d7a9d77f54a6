package scheduler

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	corev1beta1 "github.com/trellis-dev/trellis/proto/gen/trellis/core/v1beta1"
	kcorev1 "github.com/trellis-dev/trellis/proto/gen/trellis/kubernetes/core/v1"
	metav1 "github.com/trellis-dev/trellis/proto/gen/trellis/meta/v1"
)

// seedOpt changes a test seed.
type seedOpt func(*corev1beta1.Seed)

// testSeed is a usable seed (visible, GardenletReady True) of provider type and region, with Gardener's local
// networks.
func testSeed(name, typ, region string, opts ...seedOpt) *corev1beta1.Seed {
	s := &corev1beta1.Seed{
		Metadata: &metav1.ObjectMeta{Name: name},
		Spec: &corev1beta1.SeedSpec{
			Provider: &corev1beta1.SeedProvider{Type: typ, Region: region},
			Networks: &corev1beta1.SeedNetworks{Nodes: proto.String("10.0.0.0/16"), Pods: "10.1.0.0/16", Services: "10.2.0.0/16"},
		},
		Status: &corev1beta1.SeedStatus{Conditions: []*metav1.Condition{{Type: ConditionGardenletReady, Status: "True"}}},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func zones(z ...string) seedOpt { return func(s *corev1beta1.Seed) { s.Spec.Provider.Zones = z } }
func seedLabels(kv ...string) seedOpt {
	return func(s *corev1beta1.Seed) {
		s.Metadata.Labels = map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			s.Metadata.Labels[kv[i]] = kv[i+1]
		}
	}
}
func deleting(s *corev1beta1.Seed) { s.Metadata.DeletionTimestamp = timestamppb.Now() }
func hidden(s *corev1beta1.Seed) {
	s.Spec.Settings = &corev1beta1.SeedSettings{Scheduling: &corev1beta1.SeedSettingScheduling{Visible: proto.Bool(false)}}
}
func condition(typ, status string) seedOpt {
	return func(s *corev1beta1.Seed) {
		for _, c := range s.Status.Conditions {
			if c.Type == typ {
				c.Status = status
				return
			}
		}
		s.Status.Conditions = append(s.Status.Conditions, &metav1.Condition{Type: typ, Status: status})
	}
}
func withBackup(s *corev1beta1.Seed) { s.Spec.Backup = &corev1beta1.Backup{Provider: "aws"} }
func taint(key string, value *string) seedOpt {
	return func(s *corev1beta1.Seed) {
		s.Spec.Taints = append(s.Spec.Taints, &corev1beta1.SeedTaint{Key: key, Value: value})
	}
}
func allocatable(n string) seedOpt {
	return func(s *corev1beta1.Seed) { s.Status.Allocatable = map[string]string{ResourceShoots: n} }
}
func restrictions(names ...string) seedOpt {
	return func(s *corev1beta1.Seed) {
		for _, n := range names {
			s.Spec.AccessRestrictions = append(s.Spec.AccessRestrictions, &corev1beta1.AccessRestriction{Name: n})
		}
	}
}
func seedPods(cidr string) seedOpt { return func(s *corev1beta1.Seed) { s.Spec.Networks.Pods = cidr } }
func shootDefaults(pods, services string) seedOpt {
	return func(s *corev1beta1.Seed) {
		s.Spec.Networks.ShootDefaults = &corev1beta1.ShootNetworks{Pods: proto.String(pods), Services: proto.String(services)}
	}
}

// landscape is the table's garden: 23 seeds (usage in brackets) covering every rule.
//
//	aws/eu-west-1:    a[10] b[4] (3 zones), backup[4] (3 zones, BackupBucketsReady), c[0] (one zone, pods
//	                  100.96.0.0/11), full[2 of 2], labelled[7] (tier=gold), restricted[1] (eu-access-only),
//	                  tainted[0] (dedicated=team-a, pool=dedicated), notolerate[0] (taint "special" without value,
//	                  pool=special), and unusable ones: deleting, hidden, notready, unknown (no GardenletReady),
//	                  nobackupready (backup without BackupBucketsReady)
//	aws/eu-central-1: eu2-a[1] eu2-b[2];   aws/us-east-1: us1-a[0] us1-b[0];   aws/ap-southeast-1: ap-a[0]
//	gcp/europe-west1: gcp-eu-a[3] gcp-eu-b[1];   azure/westeurope: azure-eu[0];   local/local: local-a[0] (shootDefaults)
func landscape() ([]*corev1beta1.Seed, map[string]int) {
	seeds := []*corev1beta1.Seed{
		testSeed("aws-eu1-a", "aws", "eu-west-1", zones("a", "b", "c")),
		testSeed("aws-eu1-b", "aws", "eu-west-1", zones("a", "b", "c")),
		testSeed("aws-eu1-backup", "aws", "eu-west-1", zones("a", "b", "c"), withBackup, condition(ConditionBackupBucketsReady, "True")),
		testSeed("aws-eu1-c", "aws", "eu-west-1", zones("a"), seedPods("100.96.0.0/11")),
		testSeed("aws-eu1-deleting", "aws", "eu-west-1", deleting),
		testSeed("aws-eu1-full", "aws", "eu-west-1", allocatable("2"), seedLabels("pool", "full")),
		testSeed("aws-eu1-hidden", "aws", "eu-west-1", hidden),
		testSeed("aws-eu1-labelled", "aws", "eu-west-1", seedLabels("tier", "gold")),
		testSeed("aws-eu1-nobackupready", "aws", "eu-west-1", withBackup),
		testSeed("aws-eu1-notolerate", "aws", "eu-west-1", taint("special", nil), seedLabels("pool", "special")),
		testSeed("aws-eu1-notready", "aws", "eu-west-1", condition(ConditionGardenletReady, "False")),
		testSeed("aws-eu1-restricted", "aws", "eu-west-1", restrictions("eu-access-only")),
		testSeed("aws-eu1-tainted", "aws", "eu-west-1", taint("dedicated", proto.String("team-a")), seedLabels("pool", "dedicated")),
		testSeed("aws-eu1-unknown", "aws", "eu-west-1", func(s *corev1beta1.Seed) { s.Status.Conditions = nil }),
		testSeed("aws-eu2-a", "aws", "eu-central-1"),
		testSeed("aws-eu2-b", "aws", "eu-central-1"),
		testSeed("aws-us1-a", "aws", "us-east-1"),
		testSeed("aws-us1-b", "aws", "us-east-1"),
		testSeed("aws-ap-a", "aws", "ap-southeast-1"),
		testSeed("gcp-eu-a", "gcp", "europe-west1"),
		testSeed("gcp-eu-b", "gcp", "europe-west1"),
		testSeed("azure-eu", "azure", "westeurope"),
		testSeed("local-a", "local", "local", shootDefaults("10.3.0.0/16", "10.4.0.0/16")),
	}
	slices.SortFunc(seeds, func(a, b *corev1beta1.Seed) int { return strings.Compare(a.Metadata.Name, b.Metadata.Name) })
	usage := map[string]int{"aws-eu1-a": 10, "aws-eu1-b": 4, "aws-eu1-backup": 4, "aws-eu1-full": 2, "aws-eu1-labelled": 7,
		"aws-eu1-restricted": 1, "aws-eu2-a": 1, "aws-eu2-b": 2, "gcp-eu-a": 3, "gcp-eu-b": 1}
	return seeds, usage
}

type shootOpt func(*corev1beta1.Shoot)

// testShoot is an aws shoot in eu-west-1 with one worker pool and networks that clash with nothing.
func testShoot(opts ...shootOpt) *corev1beta1.Shoot {
	s := &corev1beta1.Shoot{
		Metadata: &metav1.ObjectMeta{Namespace: "garden-dev", Name: "s"},
		Spec: &corev1beta1.ShootSpec{
			CloudProfileName: proto.String("aws"),
			Region:           "eu-west-1",
			Provider:         &corev1beta1.Provider{Type: "aws", Workers: []*corev1beta1.Worker{{Name: "pool"}}},
			Networking:       &corev1beta1.Networking{Nodes: proto.String("10.250.0.0/16"), Pods: proto.String("100.96.0.0/11"), Services: proto.String("100.64.0.0/13")},
		},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func region(r string) shootOpt       { return func(s *corev1beta1.Shoot) { s.Spec.Region = r } }
func providerType(t string) shootOpt { return func(s *corev1beta1.Shoot) { s.Spec.Provider.Type = t } }
func purpose(p string) shootOpt {
	return func(s *corev1beta1.Shoot) { s.Spec.Purpose = proto.String(p) }
}
func zonal(s *corev1beta1.Shoot) {
	s.Spec.ControlPlane = &corev1beta1.ControlPlane{HighAvailability: &corev1beta1.HighAvailability{
		FailureTolerance: &corev1beta1.FailureTolerance{Type: FailureToleranceZone}}}
}
func selector(kv ...string) shootOpt {
	return func(s *corev1beta1.Shoot) {
		s.Spec.SeedSelector = &corev1beta1.SeedSelector{MatchLabels: map[string]string{}}
		for i := 0; i < len(kv); i += 2 {
			s.Spec.SeedSelector.MatchLabels[kv[i]] = kv[i+1]
		}
	}
}
func toleration(key string, value *string) shootOpt {
	return func(s *corev1beta1.Shoot) {
		s.Spec.Tolerations = append(s.Spec.Tolerations, &metav1.Toleration{Key: key, Value: value})
	}
}
func accessRestriction(name string) shootOpt {
	return func(s *corev1beta1.Shoot) {
		s.Spec.AccessRestrictions = append(s.Spec.AccessRestrictions, &corev1beta1.AccessRestrictionWithOptions{Name: name})
	}
}
func networks(nodes, pods, services *string) shootOpt {
	return func(s *corev1beta1.Shoot) {
		s.Spec.Networking = &corev1beta1.Networking{Nodes: nodes, Pods: pods, Services: services}
	}
}
func annotate(k, v string) shootOpt {
	return func(s *corev1beta1.Shoot) { s.Metadata.Annotations = map[string]string{k: v} }
}
func workerless(s *corev1beta1.Shoot) { s.Spec.Provider.Workers = nil }

func regionConfig(data map[string]string) *kcorev1.ConfigMap {
	return &kcorev1.ConfigMap{Metadata: &metav1.ObjectMeta{Namespace: GardenNamespace, Name: "aws-regions",
		Labels: map[string]string{LabelSchedulingPurpose: SchedulingPurposeRegionConfig}}, Data: data}
}

// TestDetermineSeed runs Gardener's rules on the 23-seed landscape: each case names the rule that decides, and the
// seed Gardener picks or the error it gives.
func TestDetermineSeed(t *testing.T) {
	s := proto.String
	cases := []struct {
		name  string
		rule  Rule // what decides; for a seed, the last rule that narrowed the choice
		shoot *corev1beta1.Shoot
		// landscape changes
		strategy     string
		cloudProfile *corev1beta1.CloudProfileSpec
		regionConfig *kcorev1.ConfigMap
		seeds        func([]*corev1beta1.Seed) []*corev1beta1.Seed
		want         string // seed name, or a substring of the error
	}{
		{name: "same region, fewest shoots", rule: "LeastUsed", shoot: testShoot(), want: "aws-eu1-c"},
		{name: "unusable seeds are never picked (deleting, hidden, not ready, no GardenletReady, backup not ready)", rule: RuleUsable,
			shoot: testShoot(), seeds: func(in []*corev1beta1.Seed) []*corev1beta1.Seed {
				return slices.DeleteFunc(in, func(x *corev1beta1.Seed) bool {
					return !slices.Contains([]string{"aws-eu1-deleting", "aws-eu1-hidden", "aws-eu1-notready", "aws-eu1-unknown", "aws-eu1-nobackupready", "aws-eu1-a"}, x.Metadata.Name)
				})
			}, want: "aws-eu1-a"},
		{name: "no usable seed at all", rule: RuleUsable, shoot: testShoot(), seeds: func(in []*corev1beta1.Seed) []*corev1beta1.Seed {
			return slices.DeleteFunc(in, Usable)
		}, want: "none of the 5 seeds is valid for scheduling (not deleting, visible and ready)"},
		{name: "zonal control plane needs three zones; tie broken by name", rule: RuleZonalControlPlane, shoot: testShoot(zonal), want: "aws-eu1-b"},
		{name: "zonal control plane: zones are filtered before the region", rule: RuleStrategy, shoot: testShoot(zonal, region("us-east-1")),
			want: "no matching seed candidate found for Configuration (Cloud Profile 'aws', Region 'us-east-1'"},
		{name: "zonal control plane, no seed of the provider with three zones", rule: RuleZonalControlPlane,
			shoot: testShoot(zonal, providerType("gcp"), region("europe-west1")),
			want:  "none of the 2 seeds has at least 3 zones for hosting a shoot control plane with failure tolerance type 'zone'"},
		{name: "shoot seed selector", rule: RuleShootSelector, shoot: testShoot(selector("tier", "gold")), want: "aws-eu1-labelled"},
		{name: "shoot seed selector matches nothing", rule: RuleShootSelector, shoot: testShoot(selector("tier", "platinum")),
			want: "none out of the 18 seeds has the matching labels required by seed selector of 'Shoot' (selector: 'tier=platinum')"},
		{name: "invalid shoot seed selector", rule: RuleShootSelector, shoot: testShoot(func(x *corev1beta1.Shoot) {
			x.Spec.SeedSelector = &corev1beta1.SeedSelector{MatchExpressions: []*metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Sometimes"}}}
		}), want: "label selector conversion failed"},
		{name: "taint tolerated with its value", rule: RuleCandidates, shoot: testShoot(selector("pool", "dedicated"), toleration("dedicated", s("team-a"))),
			want: "aws-eu1-tainted"},
		{name: "taint not tolerated: other value", rule: RuleCandidates, shoot: testShoot(selector("pool", "dedicated"), toleration("dedicated", s("team-b"))),
			want: "0/1 seed cluster candidate(s) are eligible for scheduling: {aws-eu1-tainted => shoot does not tolerate the seed's taints}"},
		{name: "taint not tolerated: no toleration", rule: RuleCandidates, shoot: testShoot(selector("pool", "dedicated")),
			want: "{aws-eu1-tainted => shoot does not tolerate the seed's taints}"},
		{name: "taint without value tolerated by a toleration without value", rule: RuleCandidates,
			shoot: testShoot(selector("pool", "special"), toleration("special", nil)), want: "aws-eu1-notolerate"},
		{name: "taint without value not tolerated by a toleration with a value... it is: the taint has no value to compare", rule: RuleCandidates,
			shoot: testShoot(selector("pool", "special"), toleration("special", s("x"))), want: "aws-eu1-notolerate"},
		{name: "full seed", rule: RuleCandidates, shoot: testShoot(selector("pool", "full")),
			want: "{aws-eu1-full => seed does not have available capacity for shoots}"},
		{name: "access restriction offered by the seed", rule: RuleAccessRestrictions, shoot: testShoot(accessRestriction("eu-access-only")), want: "aws-eu1-restricted"},
		{name: "access restriction nobody offers", rule: RuleAccessRestrictions, shoot: testShoot(accessRestriction("moon-access-only")),
			want: "none of the 14 seeds supports the access restrictions configured in the shoot specification"},
		{name: "other region of the provider", rule: RuleStrategy, shoot: testShoot(region("eu-central-1")), want: "aws-eu2-a"},
		{name: "tie in the region: the first by name", rule: "LeastUsed", shoot: testShoot(region("us-east-1")), want: "aws-us1-a"},
		{name: "other provider", rule: RuleProvider, shoot: testShoot(providerType("gcp"), region("europe-west1")), want: "gcp-eu-b"},
		{name: "provider nobody has", rule: RuleProvider, shoot: testShoot(providerType("openstack")),
			want: `none out of the 18 seeds has a matching provider for "openstack"`},
		{name: "SameRegion: region without seeds", rule: RuleStrategy, shoot: testShoot(region("sa-east-1")),
			want: "no matching seed candidate found for Configuration (Cloud Profile 'aws', Region 'sa-east-1', SeedDeterminationStrategy 'SameRegion')"},
		{name: "purpose testing ignores the region", rule: RuleStrategy, shoot: testShoot(region("sa-east-1"), purpose(PurposeTesting)), want: "aws-ap-a"},
		{name: "MinimalDistance without region config: Levenshtein", rule: RuleStrategy, shoot: testShoot(region("sa-east-1")),
			strategy: StrategyMinimalDistance, want: "aws-us1-a"},
		{name: "MinimalDistance, own region is nearest", rule: RuleStrategy, shoot: testShoot(), strategy: StrategyMinimalDistance, want: "aws-eu1-c"},
		{name: "MinimalDistance with the region ConfigMap", rule: RuleStrategy, shoot: testShoot(region("eu-north-1")), strategy: StrategyMinimalDistance,
			regionConfig: regionConfig(map[string]string{"eu-north-1": "eu-central-1: 5\neu-west-1: 10\n"}), want: "aws-eu2-a"},
		{name: "MinimalDistance, ConfigMap ties are all candidates", rule: "LeastUsed", shoot: testShoot(region("eu-north-1")), strategy: StrategyMinimalDistance,
			regionConfig: regionConfig(map[string]string{"eu-north-1": "eu-central-1: 5\neu-west-1: 5\n"}), want: "aws-eu1-c"},
		{name: "MinimalDistance, ConfigMap names no seed region: Levenshtein fallback", rule: RuleStrategy, shoot: testShoot(region("eu-south-1")),
			strategy: StrategyMinimalDistance, regionConfig: regionConfig(map[string]string{"eu-south-1": "mars-1: 1"}), want: "aws-eu1-c"},
		{name: "MinimalDistance, malformed ConfigMap", rule: RuleStrategy, shoot: testShoot(region("eu-west-3")), strategy: StrategyMinimalDistance,
			regionConfig: regionConfig(map[string]string{"eu-west-3": "eu-west-1: [far"}), want: `Wrong format in region ConfigMap garden/aws-regions, Region "eu-west-3"`},
		{name: "cloud profile seed selector", rule: RuleCloudProfileSelector, shoot: testShoot(),
			cloudProfile: &corev1beta1.CloudProfileSpec{SeedSelector: &corev1beta1.SeedSelector{MatchLabels: map[string]string{"tier": "gold"}}}, want: "aws-eu1-labelled"},
		{name: "cloud profile seed selector matches nothing", rule: RuleCloudProfileSelector, shoot: testShoot(),
			cloudProfile: &corev1beta1.CloudProfileSpec{SeedSelector: &corev1beta1.SeedSelector{MatchLabels: map[string]string{"tier": "iron"}}},
			want:         "seed selector of 'CloudProfile' (selector: 'tier=iron')"},
		{name: "cloud profile providerTypes allow another provider (MinimalDistance: +2)", rule: RuleProvider, shoot: testShoot(),
			strategy:     StrategyMinimalDistance,
			cloudProfile: &corev1beta1.CloudProfileSpec{SeedSelector: &corev1beta1.SeedSelector{ProviderTypes: []string{"gcp"}}}, want: "gcp-eu-b"},
		{name: "cloud profile providerTypes without the shoot's: SameRegion finds none", rule: RuleStrategy, shoot: testShoot(),
			cloudProfile: &corev1beta1.CloudProfileSpec{SeedSelector: &corev1beta1.SeedSelector{ProviderTypes: []string{"gcp"}}},
			want:         "no matching seed candidate found"},
		{name: "cloud profile providerTypes *", rule: RuleStrategy, shoot: testShoot(), strategy: StrategyMinimalDistance,
			cloudProfile: &corev1beta1.CloudProfileSpec{SeedSelector: &corev1beta1.SeedSelector{ProviderTypes: []string{"*"}}}, want: "aws-eu1-c"},
		{name: "HA VPN: overlap with the seed's pods excludes it", rule: RuleCandidates, shoot: testShoot(annotate(AnnotationHAVPN, "true")),
			want: "aws-eu1-restricted"},
		{name: "HA control plane means HA VPN, unless annotated off", rule: "LeastUsed", shoot: testShoot(zonal, annotate(AnnotationHAVPN, "false"), selector("tier", "gold")),
			seeds: func(in []*corev1beta1.Seed) []*corev1beta1.Seed {
				return append(in, testSeed("aws-eu1-zz", "aws", "eu-west-1", zones("a", "b", "c"), seedPods("100.96.0.0/11"), seedLabels("tier", "gold")))
			}, want: "aws-eu1-zz"},
		{name: "network in a reserved range", rule: RuleCandidates, shoot: testShoot(networks(s("240.0.0.0/16"), s("100.96.0.0/11"), s("100.64.0.0/13")), selector("tier", "gold")),
			want: `{aws-eu1-labelled => invalid networks: [Invalid value: "240.0.0.0/16": shoot node network intersects with reserved kube-apiserver mapping range (240.0.0.0/8)]}`},
		{name: "IPv6 network overlapping the seed's is never allowed", rule: RuleCandidates,
			shoot: testShoot(selector("tier", "gold"), networks(s("10.250.0.0/16"), s("100.96.0.0/11"), s("fd00:10:2::/56"))),
			seeds: func(in []*corev1beta1.Seed) []*corev1beta1.Seed {
				for _, x := range in {
					if x.Metadata.Name == "aws-eu1-labelled" {
						x.Spec.Networks.Services = "fd00:10:2::/48"
					}
				}
				return in
			}, want: `shoot service network intersects with seed service network`},
		{name: "no pods and services, no seed defaults", rule: RuleCandidates, shoot: testShoot(networks(s("10.250.0.0/16"), nil, nil), selector("tier", "gold")),
			want: `{aws-eu1-labelled => invalid networks: [Required value: services is required Required value: pods is required]}`},
		{name: "workerless shoots need no pods", rule: RuleCandidates, shoot: testShoot(networks(nil, nil, s("100.64.0.0/13")), workerless, selector("tier", "gold")),
			want: "aws-eu1-labelled"},
		{name: "pods and services from the seed's shootDefaults", rule: RuleCandidates,
			shoot: testShoot(providerType("local"), region("local"), networks(s("10.10.0.0/16"), nil, nil)), want: "local-a"},
		{name: "shoot networks in status count too", rule: RuleCandidates, shoot: testShoot(selector("tier", "gold"), func(x *corev1beta1.Shoot) {
			x.Status = &corev1beta1.ShootStatus{Networking: &corev1beta1.NetworkingStatus{Pods: []string{"241.0.0.0/16"}, Services: []string{"100.64.0.0/13"}}}
		}), want: "shoot pod network intersects with reserved seed pod network mapping range (241.0.0.0/8)"},
		{name: "no networking section: networks are not checked", rule: "LeastUsed", shoot: testShoot(func(x *corev1beta1.Shoot) { x.Spec.Networking = nil }),
			want: "aws-eu1-c"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seeds, usage := landscape()
			if tc.seeds != nil {
				seeds = tc.seeds(seeds)
			}
			cp := tc.cloudProfile
			if cp == nil {
				cp = &corev1beta1.CloudProfileSpec{}
			}
			got, err := DetermineSeed(tc.shoot, Landscape{Seeds: seeds, Usage: usage, CloudProfileName: "aws", CloudProfile: cp,
				RegionConfig: tc.regionConfig, Strategy: tc.strategy}, nil)
			wantSeed := !strings.Contains(tc.want, " ")
			switch {
			case wantSeed && err != nil:
				t.Fatalf("got error %v, want seed %s", err, tc.want)
			case wantSeed && got.Metadata.Name != tc.want:
				t.Fatalf("got seed %s, want %s", got.Metadata.Name, tc.want)
			case !wantSeed && err == nil:
				t.Fatalf("got seed %s, want error %q", got.Metadata.Name, tc.want)
			case !wantSeed:
				var u *Unschedulable
				if !errors.As(err, &u) || u.Rule != tc.rule {
					t.Fatalf("error %v: not Unschedulable by rule %s", err, tc.rule)
				}
				if !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %q does not contain %q", err, tc.want)
				}
			}
		})
	}
}
