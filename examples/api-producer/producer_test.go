/*
Copyright 2026 The dtq Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package apiproducer_test checks the example producer's manifests: they
// decode strictly into their Kubernetes types, and the pod reads a projected
// token for the API's audience at the path the Go client and the docs name.
package apiproducer_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/dtq-dev/dtq/pkg/client"
)

func TestProducerUsesAnAPIAudienceToken(t *testing.T) {
	b, err := os.ReadFile("producer.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := bytes.Split(b, []byte("\n---\n"))
	if len(docs) != 3 {
		t.Fatalf("%d documents, want a ServiceAccount, a RoleBinding and a Job", len(docs))
	}
	var (
		sa  corev1.ServiceAccount
		rb  rbacv1.RoleBinding
		job batchv1.Job
	)
	for i, v := range []any{&sa, &rb, &job} {
		if err := yaml.UnmarshalStrict(docs[i], v); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
	}
	pod := job.Spec.Template.Spec
	if pod.ServiceAccountName != sa.Name || rb.Subjects[0].Name != sa.Name || rb.RoleRef.Name != "dtq-producer" {
		t.Errorf("the Job runs as %q; the ServiceAccount is %q, bound to %q as %q", pod.ServiceAccountName, sa.Name, rb.RoleRef.Name, rb.Subjects[0].Name)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the pod mounts the default token (for the Kubernetes API server), which it does not need")
	}
	var (
		source *corev1.ServiceAccountTokenProjection
		path   string
	)
	for _, v := range pod.Volumes {
		if v.Projected == nil {
			continue
		}
		source = v.Projected.Sources[0].ServiceAccountToken
		for _, m := range pod.Containers[0].VolumeMounts {
			if m.Name == v.Name {
				path = filepath.Join(m.MountPath, source.Path)
			}
		}
	}
	if source == nil || source.Audience != client.DefaultAudience {
		t.Fatalf("projected token %+v, want one for audience %s", source, client.DefaultAudience)
	}
	if path != client.APITokenFile {
		t.Errorf("the token is mounted at %q, want client.APITokenFile %s", path, client.APITokenFile)
	}
	if cmd := strings.Join(pod.Containers[0].Command, " "); !strings.Contains(cmd, "Bearer $(cat "+client.APITokenFile+")") {
		t.Errorf("the command does not send the projected token: %s", cmd)
	}
}
