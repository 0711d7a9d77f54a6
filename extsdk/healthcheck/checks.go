package healthcheck

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DeploymentReady checks the Deployment name in the extension object's namespace: True when its current spec is
// rolled out and all replicas are available; Progressing while a rollout is under way or replicas are not yet
// available; False when it is missing or its rollout exceeded the progress deadline.
func DeploymentReady(name string) Check {
	return CheckFunc(func(ctx context.Context, req Request) (Result, error) {
		d := &appsv1.Deployment{}
		if err := req.Reader.Get(ctx, client.ObjectKey{Namespace: req.Object.GetNamespace(), Name: name}, d); err != nil {
			if apierrors.IsNotFound(err) {
				return Unhealthy("Deployment %s not found", name), nil
			}
			return Result{}, fmt.Errorf("get Deployment %s: %w", name, err)
		}
		return deploymentHealth(d), nil
	})
}

// deploymentHealth judges a Deployment as kubectl rollout status does.
func deploymentHealth(d *appsv1.Deployment) Result {
	replicas := int32(1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			return Unhealthy("Deployment %s exceeded its progress deadline: %s", d.Name, c.Message)
		}
	}
	switch {
	case d.Status.ObservedGeneration < d.Generation:
		return Progressing("Deployment %s: generation %d not observed yet", d.Name, d.Generation)
	case d.Status.UpdatedReplicas < replicas:
		return Progressing("Deployment %s: %d of %d replicas updated", d.Name, d.Status.UpdatedReplicas, replicas)
	case d.Status.Replicas > d.Status.UpdatedReplicas:
		return Progressing("Deployment %s: %d old replicas pending termination", d.Name,
			d.Status.Replicas-d.Status.UpdatedReplicas)
	case d.Status.AvailableReplicas < replicas:
		return Progressing("Deployment %s: %d of %d replicas available", d.Name, d.Status.AvailableReplicas, replicas)
	}
	return Healthy()
}

// ObjectExists checks that the object name of kind gvk exists in the extension object's namespace. It reads only the
// object's metadata, so a Secret's data never leaves the API server.
func ObjectExists(gvk schema.GroupVersionKind, name string) Check {
	return CheckFunc(func(ctx context.Context, req Request) (Result, error) {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(gvk)
		err := req.Reader.Get(ctx, client.ObjectKey{Namespace: req.Object.GetNamespace(), Name: name}, obj)
		switch {
		case err == nil:
			return Healthy(), nil
		case apierrors.IsNotFound(err):
			return Unhealthy("%s %s not found", gvk.Kind, name), nil
		}
		return Result{}, fmt.Errorf("get %s %s: %w", gvk.Kind, name, err)
	})
}

// SecretExists checks that the Secret name exists in the extension object's namespace.
func SecretExists(name string) Check {
	return ObjectExists(corev1.SchemeGroupVersion.WithKind("Secret"), name)
}

// ConfigMapExists checks that the ConfigMap name exists in the extension object's namespace.
func ConfigMapExists(name string) Check {
	return ObjectExists(corev1.SchemeGroupVersion.WithKind("ConfigMap"), name)
}

// ServiceExists checks that the Service name exists in the extension object's namespace.
func ServiceExists(name string) Check {
	return ObjectExists(corev1.SchemeGroupVersion.WithKind("Service"), name)
}
