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
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
)

// scheme knows the dtq types and the meta types of their requests (ListOptions ...).
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(dtqv1alpha1.AddToScheme(s))
	return s
}()

var codecs = serializer.NewCodecFactory(scheme)

// cli is what every verb shares: the kubectl connection flags (--kubeconfig,
// --context, -n ...), where the HTTP API is, and the output streams.
type cli struct {
	kube    *genericclioptions.ConfigFlags
	api     apiFlags
	streams genericiooptions.IOStreams
}

// namespace is -n, else the kubeconfig context's namespace, else "default".
func (c *cli) namespace() (string, error) {
	ns, _, err := c.kube.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// objects returns a client of dtq's objects in the namespace of -n.
func (c *cli) objects() (*kubeClient, error) {
	cfg, err := c.kube.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	ns, err := c.namespace()
	if err != nil {
		return nil, err
	}
	return newKubeClient(cfg, ns)
}

// printList lists the objects of resource (kind, as a message names them)
// in the namespace, or in every namespace with all, as kubectl get does: the
// API server's table for -o "" or wide, else the objects decoded into list
// (a list type) for printObject.
func (c *cli) printList(ctx context.Context, resource, kind string, opts metav1.ListOptions, list runtime.Object, output string, all bool) error {
	kc, err := c.objects()
	if err != nil {
		return err
	}
	if all {
		kc.ns = ""
	}
	if output == "" || output == "wide" {
		t, err := kc.table(ctx, resource, "", opts)
		if err != nil {
			return err
		}
		return printTableOrNone(c, t, kind, kc.ns, output == "wide", all)
	}
	if err := kc.list(ctx, resource, opts, list); err != nil {
		return err
	}
	return printObject(c.streams.Out, list, output, "")
}

// printer prints objects for -o format: json, yaml, name, jsonpath=...,
// go-template=...; "" prints "<kind>/<name> <operation>" as kubectl create does.
func printer(format, operation string) (printers.ResourcePrinter, error) {
	pf := genericclioptions.NewPrintFlags(operation).WithTypeSetter(scheme)
	*pf.OutputFormat = format
	return pf.ToPrinter()
}

// taskName accepts NAME or TYPE/NAME with the Task's resource names
// (task, tasks, dt, task.dtq.dev, tasks.dtq.dev), as kubectl does.
func taskName(arg string) (string, error) {
	kind, name, found := strings.Cut(arg, "/")
	if !found {
		return arg, nil
	}
	switch kind {
	case "task", "tasks", "dt", "task.dtq.dev", "tasks.dtq.dev", "task.v1alpha1.dtq.dev", "tasks.v1alpha1.dtq.dev":
		if name != "" {
			return name, nil
		}
	}
	return "", fmt.Errorf("%q is not a Task: give NAME or tasks.dtq.dev/NAME", arg)
}
