package table

import "testing"

// FuzzWanted: any Accept header asks for a Table of version v1 or v1beta1 or for none, and only an entry naming
// as=Table, g=meta.k8s.io and that version asks for one.
func FuzzWanted(f *testing.F) {
	f.Add("application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
	f.Add("application/json;as=Table;v=v1beta1;g=meta.k8s.io")
	f.Add("application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io")
	f.Add("application/yaml, */*")
	f.Add(`application/json;as="Table";v=v2;g=meta.k8s.io`)
	f.Fuzz(func(t *testing.T, accept string) {
		switch v := Wanted(accept); v {
		case "":
		case "v1", "v1beta1":
			if Wanted("application/json;as=Table;g=meta.k8s.io;v="+v) != v {
				t.Fatalf("version %s not recognised alone", v)
			}
		default:
			t.Fatalf("Wanted(%q) = %q", accept, v)
		}
	})
}
