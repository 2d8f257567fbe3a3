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

package main

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
)

// kubeClient reads and writes dtq's objects (Tasks and Queues) in one
// namespace ("" with list: all namespaces), the way a generated clientset
// would, plus the API server's tables.
type kubeClient struct {
	rest *rest.RESTClient
	ns   string
}

func newKubeClient(cfg *rest.Config, ns string) (*kubeClient, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &dtqv1alpha1.GroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = codecs.WithoutConversion()
	if cfg.UserAgent == "" {
		cfg.UserAgent = "kubectl-dtq"
	}
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &kubeClient{rest: rc, ns: ns}, nil
}

var paramCodec = runtime.NewParameterCodec(scheme)

func (c *kubeClient) getTask(ctx context.Context, name string) (*dtqv1alpha1.Task, error) {
	t := &dtqv1alpha1.Task{}
	return t, c.rest.Get().Namespace(c.ns).Resource("tasks").Name(name).Do(ctx).Into(t)
}

func (c *kubeClient) createTask(ctx context.Context, t *dtqv1alpha1.Task) (*dtqv1alpha1.Task, error) {
	out := &dtqv1alpha1.Task{}
	return out, c.rest.Post().Namespace(c.ns).Resource("tasks").Body(t).Do(ctx).Into(out)
}

func (c *kubeClient) listTasks(ctx context.Context, opts metav1.ListOptions) (*dtqv1alpha1.TaskList, error) {
	out := &dtqv1alpha1.TaskList{}
	return out, c.list(ctx, "tasks", opts, out)
}

// list lists the objects of resource into out (a list type).
func (c *kubeClient) list(ctx context.Context, resource string, opts metav1.ListOptions, out runtime.Object) error {
	return c.rest.Get().Namespace(c.ns).Resource(resource).VersionedParams(&opts, paramCodec).Do(ctx).Into(out)
}

func (c *kubeClient) watchTasks(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.rest.Get().Namespace(c.ns).Resource("tasks").VersionedParams(&opts, paramCodec).Watch(ctx)
}

// mergePatch applies a JSON merge patch to the named object of resource and
// decodes the result into out.
func (c *kubeClient) mergePatch(ctx context.Context, resource, name string, patch any, out runtime.Object) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	return c.rest.Patch(types.MergePatchType).Namespace(c.ns).Resource(resource).Name(name).Body(data).Do(ctx).Into(out)
}

// table lists the objects of resource (or gets the named one) as the API
// server's table: the columns kubectl get shows.
func (c *kubeClient) table(ctx context.Context, resource, name string, opts metav1.ListOptions) (*metav1.Table, error) {
	req := c.rest.Get().Namespace(c.ns).Resource(resource).VersionedParams(&opts, paramCodec).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if name != "" {
		req = req.Name(name)
	}
	raw, err := req.DoRaw(ctx)
	if apierrors.IsNotFound(err) && name != "" { // the error body of a table request is not decoded
		return nil, notFound(resource, name)
	}
	if err != nil {
		return nil, err
	}
	t := &metav1.Table{}
	if err := json.Unmarshal(raw, t); err != nil {
		return nil, fmt.Errorf("decode the %s table: %w", resource, err)
	}
	return t, nil
}

func notFound(resource, name string) error {
	return apierrors.NewNotFound(dtqv1alpha1.GroupVersion.WithResource(resource).GroupResource(), name)
}
