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
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/devstack"
	"github.com/dtq-dev/dtq/pkg/client"
)

type submitFlags struct {
	file, name, queue, typ, payload, key, flowKey, output string
	priority, maxAttempts                                 int32
	timeout, delay, ttl                                   time.Duration
	viaAPI                                                bool
}

func newSubmitCommand(c *cli) *cobra.Command {
	var f submitFlags
	cmd := &cobra.Command{
		Use:   "submit (--queue QUEUE --type TYPE [flags] | -f FILE)",
		Short: "Submit a task as a Task object, or over the HTTP API (--via-api)",
		Long: `submit creates a Task object, from flags or from a manifest (-f FILE, - for
stdin; every Task in it). Without --name the Task is named after its type with a
random suffix. It prints the Task's name; follow it with kubectl dtq wait.

With --via-api it submits the task from the flags over the dtq HTTP API instead
(no Task object: two API-server writes fewer) and prints "ID submitted" (with
-o name the ID alone); follow it with kubectl dtq get --via-api --queue QUEUE ID
or kubectl dtq events QUEUE -f.
A key whose task is in progress is refused (IDEMPOTENCY_IN_PROGRESS, naming the
task); one whose task finished prints that task, marked duplicate, and says when
that task was submitted with another type or payload (on a Queue with
spec.idempotency.onMismatch Reject that is refused: IDEMPOTENCY_KEY_MISMATCH).`,
		Example: `  kubectl dtq submit --queue default --type echo --payload '{"hello":"world"}'
  kubectl dtq submit --queue emails --type send --key receipt-1001 --max-attempts 3 -o name
  kubectl dtq submit --queue emails --type send --flow-key tenant-a
  kubectl dtq submit -f config/samples/dtq_v1alpha1_task.yaml
  kubectl dtq wait "$(kubectl dtq submit --queue default --type sleep --payload '{"seconds":2}' -o name)"
  ID=$(kubectl dtq submit --via-api --queue default --type echo -o name)
  kubectl dtq get --via-api --queue default "$ID"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.viaAPI {
				return f.submitViaAPI(cmd.Context(), c)
			}
			tasks, err := f.tasks(c.streams.In)
			if err != nil {
				return err
			}
			kc, err := c.objects()
			if err != nil {
				return err
			}
			p, err := printer(f.output, "created")
			if err != nil {
				return err
			}
			for _, t := range tasks {
				ns := kc.ns
				if t.Namespace != "" {
					if flag := *c.kube.Namespace; flag != "" && flag != t.Namespace {
						return fmt.Errorf("task %q is in namespace %q, not %q of -n", t.Name, t.Namespace, flag)
					}
					ns = t.Namespace
				}
				created, err := (&kubeClient{rest: kc.rest, ns: ns}).createTask(cmd.Context(), t)
				if err != nil {
					return err
				}
				if err := p.PrintObj(created, c.streams.Out); err != nil {
					return err
				}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.file, "filename", "f", "", "Manifest with Tasks (YAML or JSON, - for stdin) instead of the flags below.")
	fl.StringVar(&f.name, "name", "", "Task name (default: TYPE-<random>).")
	fl.StringVar(&f.queue, "queue", "", "Queue in the namespace (required without -f).")
	fl.StringVar(&f.typ, "type", "", "Handler type (required without -f).")
	fl.StringVar(&f.payload, "payload", "", "Payload, a JSON object.")
	fl.StringVar(&f.key, "key", "", "Idempotency key.")
	fl.StringVar(&f.flowKey, "flow-key", "", "Flow key: on a Queue with flowControl, the key whose limits and share apply (docs/flow-control.md).")
	fl.Int32Var(&f.priority, "priority", 5, "Priority, 0..9 (9 first).")
	fl.Int32Var(&f.maxAttempts, "max-attempts", 0, "Attempts before the task fails (default: the Queue's).")
	fl.DurationVar(&f.timeout, "handler-timeout", 0, "Handler deadline (default: the Queue's taskTimeout).")
	fl.DurationVar(&f.delay, "delay", 0, "Run no earlier than this long from now.")
	fl.DurationVar(&f.ttl, "ttl", 0, "Expire the task if it has not started this long after submission.")
	fl.StringVarP(&f.output, "output", "o", "", "Output format: json, yaml, name, jsonpath=TEMPLATE (default: TASK created); with --via-api json, yaml or name (the task ID).")
	fl.BoolVar(&f.viaAPI, "via-api", false, "Submit over the dtq HTTP API (see --api-url) instead of creating a Task object.")
	return cmd
}

// tasks builds the Tasks to create from the manifest or the flags.
func (f *submitFlags) tasks(stdin io.Reader) ([]*dtqv1alpha1.Task, error) {
	if f.file != "" {
		if f.queue != "" || f.typ != "" || f.payload != "" || f.key != "" || f.flowKey != "" || f.name != "" {
			return nil, errors.New("give either -f or the task flags (--queue, --type ...), not both")
		}
		return readTasks(f.file, stdin)
	}
	if f.queue == "" || f.typ == "" {
		return nil, errors.New("--queue and --type are required (or -f FILE)")
	}
	t := &dtqv1alpha1.Task{Spec: dtqv1alpha1.TaskSpec{Queue: f.queue, Type: f.typ, IdempotencyKey: f.key, FlowKey: f.flowKey,
		Priority: ptr.To(f.priority)}}
	if f.name != "" {
		t.Name = f.name
	} else {
		t.GenerateName = f.typ + "-"
	}
	if f.payload != "" {
		var obj map[string]any
		if err := json.Unmarshal([]byte(f.payload), &obj); err != nil {
			return nil, fmt.Errorf("--payload must be a JSON object: %w", err)
		}
		t.Spec.Payload = &runtime.RawExtension{Raw: []byte(f.payload)}
	}
	if f.maxAttempts > 0 {
		t.Spec.MaxAttempts = ptr.To(f.maxAttempts)
	}
	for _, d := range []struct {
		v   time.Duration
		dst **metav1.Duration
	}{{f.timeout, &t.Spec.Timeout}, {f.delay, &t.Spec.Delay}, {f.ttl, &t.Spec.TTL}} {
		if d.v > 0 {
			*d.dst = &metav1.Duration{Duration: d.v}
		}
	}
	return []*dtqv1alpha1.Task{t}, nil
}

// readTasks reads every object of a manifest; each must be a dtq.dev/v1alpha1 Task.
func readTasks(path string, stdin io.Reader) ([]*dtqv1alpha1.Task, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	objs, err := devstack.DecodeManifests(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var tasks []*dtqv1alpha1.Task
	for _, u := range objs {
		if gvk := u.GroupVersionKind(); gvk != dtqv1alpha1.GroupVersion.WithKind("Task") {
			return nil, fmt.Errorf("%s: %s %q is not a %s Task", path, gvk.Kind, u.GetName(), dtqv1alpha1.GroupVersion)
		}
		t := &dtqv1alpha1.Task{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, t, true); err != nil {
			return nil, fmt.Errorf("%s: Task %q: %w", path, u.GetName(), err)
		}
		tasks = append(tasks, t)
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("%s holds no Task", path)
	}
	return tasks, nil
}

// submitViaAPI submits the task of the flags over the HTTP API.
func (f *submitFlags) submitViaAPI(ctx context.Context, c *cli) error {
	if f.file != "" || f.name != "" {
		return errors.New("--via-api submits from the flags: -f and --name make Task objects")
	}
	if f.queue == "" || f.typ == "" {
		return errors.New("--queue and --type are required")
	}
	var payload json.RawMessage
	if f.payload != "" {
		var obj map[string]any
		if err := json.Unmarshal([]byte(f.payload), &obj); err != nil {
			return fmt.Errorf("--payload must be a JSON object: %w", err)
		}
		payload = json.RawMessage(f.payload)
	}
	opts := []client.SubmitOption{client.Priority(int(f.priority)), client.IdempotencyKey(f.key), client.FlowKey(f.flowKey)}
	if f.maxAttempts > 0 {
		opts = append(opts, client.MaxAttempts(int(f.maxAttempts)))
	}
	for _, o := range []struct {
		v   time.Duration
		opt func(time.Duration) client.SubmitOption
	}{{f.timeout, client.Timeout}, {f.delay, client.Delay}, {f.ttl, client.TTL}} {
		if o.v > 0 {
			opts = append(opts, o.opt(o.v))
		}
	}
	q, err := c.apiQueue(f.queue)
	if err != nil {
		return err
	}
	t, err := q.Submit(ctx, f.typ, payload, opts...)
	if err != nil {
		return err
	}
	if f.output == "" {
		what := "submitted"
		if t.Duplicate {
			what = "is a duplicate of the key's task (" + string(t.Status) + ")"
			if t.RequestMatches != nil && !*t.RequestMatches {
				what += ", which was submitted with another type or payload: this submission's payload does not run"
			}
		}
		_, err := fmt.Fprintf(c.streams.Out, "%s %s\n", t.TaskID, what)
		return err
	}
	return apiView{doc: t, names: []string{t.TaskID}}.print(c, f.output, "")
}
