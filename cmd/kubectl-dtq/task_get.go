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
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/client"
)

// taskStates are the values of --state: client.TaskStatuses, the one list.
var taskStates = func() []dtqv1alpha1.TaskState {
	out := make([]dtqv1alpha1.TaskState, len(client.TaskStatuses))
	for i, s := range client.TaskStatuses {
		out[i] = dtqv1alpha1.TaskState(s)
	}
	return out
}()

// canonicalState turns a --state value of any case into the state's name
// (Succeeded), as the HTTP API accepts it; field selectors need the name.
func canonicalState(state *string) error {
	if *state == "" {
		return nil
	}
	for _, s := range taskStates {
		if strings.EqualFold(*state, string(s)) {
			*state = string(s)
			return nil
		}
	}
	return fmt.Errorf("--state %q is not a task state: %v", *state, taskStates)
}

const outputHelp = "Output format: wide, json, yaml, name, jsonpath=TEMPLATE or go-template=TEMPLATE (default: a table)."

func newGetCommand(c *cli) *cobra.Command {
	var output, queue string
	var viaAPI bool
	cmd := &cobra.Command{
		Use:   "get TASK...",
		Short: "Show Tasks by name, or tasks by ID over the HTTP API (--via-api)",
		Long: `get shows the named Tasks of the namespace with the columns of kubectl get tasks.dtq.dev.

With --via-api --queue QUEUE it shows tasks by ID from the engine through the dtq
HTTP API: any task of the queue, submitted over HTTP, by a Task object (its ID is
the Task's status.taskID) or by the direct producer, with payload and result.`,
		Example: `  kubectl dtq get invoice-42
  kubectl dtq get invoice-42 -o jsonpath='{.status.result}'
  kubectl dtq -n emails get tasks.dtq.dev/receipt-1001 -o yaml
  kubectl dtq get --via-api --queue emails 01JD6Q1T0F4N3 -o json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if viaAPI {
				return getViaAPI(cmd.Context(), c, queue, args, output)
			}
			if queue != "" {
				return errors.New("--queue goes with --via-api (a Task object's name is unique in its namespace)")
			}
			kc, err := c.objects()
			if err != nil {
				return err
			}
			var table *metav1.Table
			list := &dtqv1alpha1.TaskList{}
			for _, arg := range args {
				name, err := taskName(arg)
				if err != nil {
					return err
				}
				if output == "" || output == "wide" {
					t, err := kc.table(cmd.Context(), "tasks", name, metav1.ListOptions{})
					if err != nil {
						return err
					}
					if table == nil {
						table = t
					} else {
						table.Rows = append(table.Rows, t.Rows...)
					}
					continue
				}
				t, err := kc.getTask(cmd.Context(), name)
				if err != nil {
					return err
				}
				list.Items = append(list.Items, *t)
			}
			if table != nil {
				return printTable(c.streams.Out, table, output == "wide", false)
			}
			var obj runtime.Object = list
			if len(list.Items) == 1 {
				obj = &list.Items[0]
			}
			return printObject(c.streams.Out, obj, output, "")
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", outputHelp+" With --via-api: wide, json, yaml or name.")
	cmd.Flags().BoolVar(&viaAPI, "via-api", false, "Read tasks by ID through the dtq HTTP API (needs --queue).")
	cmd.Flags().StringVar(&queue, "queue", "", "The tasks' queue (with --via-api).")
	return cmd
}

type listFlags struct {
	queue, state, typ, key, flowKey, selector, output string
	allNamespaces, viaAPI                             bool
	limit                                             int
}

func newListCommand(c *cli) *cobra.Command {
	var f listFlags
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List Tasks (or, --via-api, every task of the engine), filtered by queue, state ...",
		Long: `list shows the Tasks of the namespace (-A: of every namespace) with the columns of
kubectl get tasks.dtq.dev. The filters run on the API server as field selectors
(spec.queue, status.state, spec.type, spec.idempotencyKey, spec.flowKey), so
kubectl get tasks.dtq.dev --field-selector status.state=DeadLettered is the same query.

With --via-api it lists the tasks the engine keeps, newest first, through the dtq
HTTP API: those submitted over HTTP, by Task objects and by the direct producer, of
--queue or of every queue of the namespace, filtered by --state (--limit: at most
that many per queue).`,
		Example: `  kubectl dtq list --queue emails
  kubectl dtq list -A --state DeadLettered -o wide
  kubectl dtq list --key invoice-42 -o name
  kubectl dtq list --via-api --queue emails --state Failed`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.viaAPI {
				return f.listViaAPI(cmd.Context(), c)
			}
			opts, err := f.listOptions()
			if err != nil {
				return err
			}
			return c.printList(cmd.Context(), "tasks", "Tasks", opts, &dtqv1alpha1.TaskList{}, f.output, f.allNamespaces)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.queue, "queue", "", "Only Tasks of this Queue.")
	fl.StringVar(&f.state, "state", "", fmt.Sprintf("Only Tasks in this state: %v.", taskStates))
	fl.StringVar(&f.typ, "type", "", "Only Tasks of this handler type.")
	fl.StringVar(&f.key, "key", "", "Only Tasks with this idempotency key.")
	fl.StringVar(&f.flowKey, "flow-key", "", "Only Tasks with this flow key.")
	fl.StringVarP(&f.selector, "selector", "l", "", "Label selector, as kubectl's -l.")
	fl.BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "List the Tasks of every namespace.")
	fl.StringVarP(&f.output, "output", "o", "", outputHelp+" With --via-api: wide, json, yaml or name.")
	fl.BoolVar(&f.viaAPI, "via-api", false, "List the engine's tasks through the dtq HTTP API (--queue, --state, --limit).")
	fl.IntVar(&f.limit, "limit", 0, "With --via-api: at most this many tasks per queue (default: all).")
	return cmd
}

func (f *listFlags) listOptions() (metav1.ListOptions, error) {
	if err := canonicalState(&f.state); err != nil {
		return metav1.ListOptions{}, err
	}
	set := fields.Set{}
	for field, v := range map[string]string{"spec.queue": f.queue, "status.state": f.state, "spec.type": f.typ, "spec.idempotencyKey": f.key,
		"spec.flowKey": f.flowKey} {
		if v != "" {
			set[field] = v
		}
	}
	return metav1.ListOptions{LabelSelector: f.selector, FieldSelector: fields.SelectorFromSet(set).String()}, nil
}

// printTableOrNone prints a list's table, or says on stderr that there is
// nothing of kind (in namespace ns; "": anywhere), as kubectl get does.
func printTableOrNone(c *cli, t *metav1.Table, kind, ns string, wide, withNamespace bool) error {
	if len(t.Rows) > 0 {
		return printTable(c.streams.Out, t, wide, withNamespace)
	}
	where := ""
	if ns != "" {
		where = " in namespace " + ns
	}
	_, err := fmt.Fprintf(c.streams.ErrOut, "No %s found%s.\n", kind, where)
	return err
}

// printTable prints a server-side table as kubectl get does; wide adds the
// columns of priority 1, withNamespace a namespace column.
func printTable(w io.Writer, t *metav1.Table, wide, withNamespace bool) error {
	for i := range t.Rows {
		row := &t.Rows[i]
		if row.Object.Raw == nil {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(row.Object.Raw); err != nil {
			return fmt.Errorf("decode a table row: %w", err)
		}
		row.Object.Object = u
	}
	return printers.NewTablePrinter(printers.PrintOptions{Wide: wide, WithNamespace: withNamespace}).PrintObj(t, w)
}

// printObject prints obj for -o format (see printer); a list prints its
// items one by one with -o name.
func printObject(w io.Writer, obj runtime.Object, format, operation string) error {
	p, err := printer(format, operation)
	if err != nil {
		return err
	}
	if format == "name" && meta.IsListType(obj) {
		return meta.EachListItem(obj, func(item runtime.Object) error { return p.PrintObj(item, w) })
	}
	return p.PrintObj(obj, w)
}
