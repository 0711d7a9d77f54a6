package gardenlet

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// fatalWaiting are the waiting reasons of a container that will not start without a change: a missing or unpullable
// image, a configuration the process rejects (it exits, and the kubelet backs off), a container the runtime cannot
// create.
var fatalWaiting = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CrashLoopBackOff": true, "CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// Failure says why a rollout started at since failed, from the pods of the agent's Deployment (self, the running
// agent's own pod, is left out): a pod that is not ready with a container waiting for a fatal reason once grace has
// passed since the upgrade, or any pod not ready once timeout has. It returns "" while the rollout may still succeed.
func Failure(pods []corev1.Pod, self string, since, now time.Time, grace, timeout time.Duration) string {
	age := now.Sub(since)
	for i := range pods {
		p := &pods[i]
		if p.Name == self || p.DeletionTimestamp != nil || podReady(p) {
			continue
		}
		for _, cs := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			w := cs.State.Waiting
			if w == nil || !fatalWaiting[w.Reason] || age < grace {
				continue
			}
			msg := fmt.Sprintf("pod %s: container %s waiting: %s", p.Name, cs.Name, w.Reason)
			if w.Message != "" {
				msg += ": " + w.Message
			}
			if t := cs.LastTerminationState.Terminated; t != nil {
				msg += fmt.Sprintf(" (last exit code %d", t.ExitCode)
				if t.Message != "" {
					msg += ": " + t.Message
				}
				msg += ")"
			}
			return msg
		}
		if age >= timeout {
			return fmt.Sprintf("pod %s not ready %s after the upgrade", p.Name, timeout)
		}
	}
	return ""
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
