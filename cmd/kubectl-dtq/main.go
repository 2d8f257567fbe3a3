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

// Command kubectl-dtq is dtq's command-line tool. Named kubectl-dtq on the
// PATH, it is also a kubectl plugin: `kubectl dtq list`.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/dtq-dev/dtq/internal/version"
)

// exitError ends the command with a documented exit code.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubectl-dtq:", err)
		if hint := apiTokenHint(err); hint != "" {
			fmt.Fprintln(os.Stderr, "kubectl-dtq:", hint)
		}
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

func newRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	c := &cli{kube: genericclioptions.NewConfigFlags(true), streams: streams}
	root := &cobra.Command{
		Use:   "kubectl-dtq",
		Short: "dtq, the Kubernetes-native task queue: submit, inspect, wait for and retry tasks",
		Long: `kubectl-dtq works with dtq's Task and Queue objects (tasks.dtq.dev, queues.dtq.dev)
through the API server, with the connection and credentials of kubectl
(--kubeconfig, --context, -n), and with what has no object (dead letters, queue
stats, workers, flow keys, events, tasks submitted over HTTP) through the dtq HTTP API
(--api-url), with a token for its audience requested for the kubeconfig's
ServiceAccount (or --api-token). Installed on the PATH it is the kubectl plugin
"kubectl dtq". "dev" runs the whole product on this machine.`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl dtq"},
		Version:       version.String(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.Flags().Bool("version", false, "Print the version and exit (the line of kubectl dtq version's Client).")
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	c.kube.AddFlags(root.PersistentFlags())
	c.api.addFlags(root.PersistentFlags())
	root.AddGroup(&cobra.Group{ID: "tasks", Title: "Tasks:"}, &cobra.Group{ID: "queues", Title: "Queues:"},
		&cobra.Group{ID: "local", Title: "Local stack:"})
	for _, cmd := range []*cobra.Command{
		newSubmitCommand(c), newGetCommand(c), newListCommand(c), newWaitCommand(c), newCancelCommand(c), newRetryCommand(c),
		newScheduleCommand(c),
	} {
		cmd.GroupID = "tasks"
		root.AddCommand(cmd)
	}
	for _, cmd := range []*cobra.Command{newQueueCommand(c), newDLQCommand(c), newWorkersCommand(c), newFlowCommand(c), newEventsCommand(c)} {
		cmd.GroupID = "queues"
		root.AddCommand(cmd)
	}
	for _, cmd := range []*cobra.Command{newDevCommand(), newUICommand(c)} {
		cmd.GroupID = "local"
		root.AddCommand(cmd)
	}
	root.AddCommand(newVersionCommand(c))
	return root
}
