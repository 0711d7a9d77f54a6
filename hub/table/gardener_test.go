package table

import (
	"slices"
	"strings"
	"testing"

	"github.com/trellis-dev/trellis/hub/api"
)

// gardenerColumn is a column of the Table Gardener's apiserver answers for a kind (its registry's table convertor,
// pkg/apiserver/registry/<group>/<kind>/storage/tableconvertor.go): the name and whether it is wide only.
type gardenerColumn struct {
	name string
	wide bool
}

// gardenerColumns are the columns of Gardener's table convertors after NAME and without AGE, in their order, for
// the kinds whose convertors were read (facts of gardener/gardener's master, 2026-11).
var gardenerColumns = map[string][]gardenerColumn{
	"Shoot": {{"CloudProfile", false}, {"Provider", false}, {"Region", false}, {"Seed", true}, {"K8S Version", false}, {"Hibernation", false},
		{"Last Operation", false}, {"Status", false}, {"Purpose", true}, {"Gardener Version", true}, {"APIServer", true}, {"Control", true},
		{"Observability", true}, {"Nodes", true}, {"System", true}},
	"Seed":                   {{"Status", false}, {"Last Operation", false}, {"Provider", false}, {"Region", false}, {"Version", false}, {"K8S Version", false}},
	"Project":                {{"Namespace", false}, {"Status", false}, {"Owner", false}, {"Creator", false}},
	"BackupBucket":           {{"Provider", false}, {"Seed", false}, {"Operation", false}, {"Progress", false}},
	"BackupEntry":            {{"Bucket", false}, {"Seed", false}, {"Operation", false}, {"Progress", false}},
	"CloudProfile":           {{"Provider", false}},
	"NamespacedCloudProfile": {{"Parent Name", false}, {"Parent Kind", false}},
	"ControllerInstallation": {{"Registration", false}, {"Cluster", false}, {"Valid", false}, {"Installed", false}, {"Healthy", false}, {"Progressing", false}},
	"ControllerRegistration": {{"Resources", false}},
	"SecretBinding":          {{"Secret", false}, {"Provider", false}},
	"CredentialsBinding":     {{"Provider", false}, {"APIVersion", false}, {"Kind", false}, {"Name", false}},
	"Quota":                  {{"Scope", false}, {"Cluster Lifetime", false}},
	"ExposureClass":          {{"Handler", false}},
	"ManagedSeed":            {{"Status", false}, {"Shoot", false}},
	"Bastion":                {{"Shoot", false}, {"Seed", false}, {"IP", false}, {"Heartbeat", false}, {"Expires", false}},
	"ShootState":             {{"Gardener Data", false}, {"Extension States", false}},
	"InternalSecret":         {{"Type", false}, {"Data", false}},
	"WorkloadIdentity":       {{"Sub", false}, {"Type", false}, {"Audiences", true}},
	"Gardenlet":              {{"OCI Repository", false}, {"Reconciled", false}},
	"ManagedSeedSet":         {{"Ready", false}, {"Pending", false}},
	// Gardener serves ControllerDeployment v1 and v1beta1 with the same convertor: NAME and AGE.
	"ControllerDeployment": {},
}

// differences are where the hub's columns differ from Gardener's on purpose, by kind: what kubectl get shows of
// the kind against the hub, against Gardener, and why.
var differences = map[string]struct{ hub, gardener, why string }{
	"Shoot": {"... STATUS AGE | SEED PURPOSE ... SYSTEM TECHNICAL ID", "... STATUS | SEED ... SYSTEM AGE",
		"wide columns follow AGE in the hub's (and trellisctl's) tables; TECHNICAL ID is the hub's addition"},
	"Seed": {"... K8S VERSION AGE", "... REGION AGE VERSION K8S VERSION", "AGE ends the default columns in the hub's tables"},
	"ControllerInstallation": {"REGISTRATION SEED VALID ...", "REGISTRATION CLUSTER VALID ...",
		"installations of the hub are per seed only (no shoot installations): the column names the seed"},
	"ControllerRegistration": {"TYPES | KINDS", "RESOURCES (kind/type, ...)", "a column shows a JSONPath's values; kinds and types are two paths"},
	"CredentialsBinding": {"PROVIDER APIVERSION KIND CREDENTIALS", "PROVIDER APIVERSION KIND NAME",
		"a second NAME column would be ambiguous in kubectl's output and in trellisctl's"},
	"CloudProfile": {"PROVIDER AGE | REGIONS", "PROVIDER AGE", "REGIONS is the hub's wide addition"},
	"Bastion":      {"... EXPIRES AGE | READY", "... EXPIRES AGE", "READY is the hub's wide addition"},
	"ManagedSeedSet": {"READY PENDING AGE | REPLICAS", "READY PENDING AGE",
		"READY counts the ready replicas (Gardener's shows ready/desired): REPLICAS, the desired ones, is the hub's wide addition"},
}

func norm(s string) string { return strings.ToUpper(strings.Join(strings.Fields(s), " ")) }

// TestColumnsAsGardener compares every Gardener kind's Table columns with Gardener's table convertor: the default
// columns must be Gardener's (names compared as kubectl prints them, upper case), in Gardener's order, and Gardener's
// wide columns must be there; where they differ on purpose the difference is listed (differences) and documented in
// docs/api.md, and a listed difference that no longer exists fails too.
func TestColumnsAsGardener(t *testing.T) {
	for _, k := range api.Kinds {
		want, ok := gardenerColumns[k.Kind]
		if !ok || !strings.Contains(k.Group, "gardener.cloud") {
			continue
		}
		cols, _, err := kindColumns(k)
		if err != nil {
			t.Fatal(err)
		}
		var gotDefault, gotWide, wantDefault, wantWide []string
		for _, c := range cols {
			if c == age {
				continue
			}
			if c.GetPriority() > 0 {
				gotWide = append(gotWide, norm(c.GetName()))
			} else {
				gotDefault = append(gotDefault, norm(c.GetName()))
			}
		}
		for _, c := range want {
			if c.wide {
				wantWide = append(wantWide, norm(c.name))
			} else {
				wantDefault = append(wantDefault, norm(c.name))
			}
		}
		missingWide := slices.DeleteFunc(slices.Clone(wantWide), func(n string) bool { return slices.Contains(gotWide, n) })
		same := slices.Equal(gotDefault, wantDefault) && len(missingWide) == 0 && len(gotWide) == len(wantWide)
		agePlace := k.Kind == "Seed" || k.Kind == "Shoot" // Gardener's AGE is not after its default columns
		_, listed := differences[k.Kind]
		switch {
		case !same && !listed:
			t.Errorf("%s: columns %v | wide %v, Gardener's %v | wide %v", k.Kind, gotDefault, gotWide, wantDefault, wantWide)
		case same && listed && !agePlace:
			t.Errorf("%s: listed as differing from Gardener, but its columns are Gardener's now", k.Kind)
		case !same && listed && len(missingWide) > 0:
			t.Errorf("%s: Gardener's wide columns %v are missing", k.Kind, missingWide)
		}
	}
}
