package admission

import (
	"context"
	"net"

	"golang.org/x/crypto/ssh"
	"k8s.io/apimachinery/pkg/util/validation/field"

	operationsv1alpha1 "github.com/trellis-dev/trellis/proto/gen/trellis/operations/v1alpha1"
)

func init() { register(nil, validateBastion, nil) }

// validateBastion checks spec.shootRef.name, spec.sshPublicKey (an authorized_keys line) and spec.ingress (at least
// one entry, each ipBlock.cidr a valid CIDR); the shoot and the key are immutable.
func validateBastion(_ context.Context, _ Reader, b, old *operationsv1alpha1.Bastion) field.ErrorList {
	errs := nameIsDNSLabel(b.GetMetadata())
	p := field.NewPath("spec")
	spec := b.GetSpec()
	if spec.GetShootRef().GetName() == "" {
		errs = append(errs, field.Required(p.Child("shootRef", "name"), "shoot reference must not be empty"))
	}
	kp := p.Child("sshPublicKey")
	if spec.GetSshPublicKey() == "" {
		errs = append(errs, field.Required(kp, "sshPublicKey must not be empty"))
	} else if _, _, _, _, err := ssh.ParseAuthorizedKey([]byte(spec.GetSshPublicKey())); err != nil {
		errs = append(errs, field.Invalid(kp, spec.GetSshPublicKey(), "invalid sshPublicKey: "+err.Error()))
	}
	ip := p.Child("ingress")
	if len(spec.GetIngress()) == 0 {
		errs = append(errs, field.Required(ip, "ingress must not be empty"))
	}
	for i, in := range spec.GetIngress() {
		cp := ip.Index(i).Child("ipBlock", "cidr")
		c := in.GetIpBlock().GetCidr()
		if c == "" {
			errs = append(errs, field.Required(cp, "CIDR must not be empty"))
		} else if _, _, err := net.ParseCIDR(c); err != nil {
			errs = append(errs, field.Invalid(cp, c, "invalid CIDR"))
		}
	}
	if old != nil {
		errs = append(errs, immutable(p.Child("shootRef", "name"), spec.GetShootRef().GetName(), old.GetSpec().GetShootRef().GetName())...)
		errs = append(errs, immutable(kp, spec.GetSshPublicKey(), old.GetSpec().GetSshPublicKey())...)
	}
	return errs
}
