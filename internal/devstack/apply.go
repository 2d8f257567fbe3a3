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

package devstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldManager is the field manager of everything the dev stack applies.
const FieldManager = "kubectl-dtq"

// LoadManifests reads every object of the YAML files (*.yaml, *.yml) directly
// in dir, skipping kustomization.yaml, in file name order.
func LoadManifests(dir string) ([]*unstructured.Unstructured, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || name == "kustomization.yaml" || (!strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml")) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		got, err := DecodeManifests(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		objs = append(objs, got...)
	}
	return objs, nil
}

// DecodeManifests decodes a multi-document YAML or JSON stream.
func DecodeManifests(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("object without apiVersion or kind: %v", m)
		}
		objs = append(objs, u)
	}
}

// kindOrder applies the objects others refer to first.
var kindOrder = map[string]int{"Namespace": 0, "Secret": 1, "ConfigMap": 1, "Queue": 2, "Task": 4}

// Apply server-side applies objs (kubectl apply --server-side), namespaced
// objects without a namespace into "default"; Namespaces, Secrets and
// ConfigMaps first, then Queues, then the rest, Tasks last.
func Apply(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	sorted := make([]*unstructured.Unstructured, len(objs))
	copy(sorted, objs)
	sort.SliceStable(sorted, func(i, j int) bool { return rank(sorted[i]) < rank(sorted[j]) })
	for _, o := range sorted {
		o = o.DeepCopy()
		if o.GetNamespace() == "" {
			namespaced, err := c.IsObjectNamespaced(o)
			if err != nil {
				return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
			}
			if namespaced {
				o.SetNamespace("default")
			}
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

func rank(o *unstructured.Unstructured) int {
	if r, ok := kindOrder[o.GetKind()]; ok {
		return r
	}
	return 3
}
