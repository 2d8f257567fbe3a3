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
	"github.com/spf13/cobra"

	"github.com/dtq-dev/dtq/pkg/client"
)

func newWorkersCommand(c *cli) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "workers QUEUE",
		Short: "Live workers of a queue (HTTP API)",
		Long: `workers lists the queue's live workers (those whose heartbeat has not expired)
through the dtq HTTP API: slots (concurrency), tasks in flight, start and last
heartbeat; -o wide adds the hostname and the worker's dtq version.`,
		Example: `  kubectl dtq workers emails
  kubectl dtq workers emails -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q, err := c.apiQueue(args[0])
			if err != nil {
				return err
			}
			ws, err := q.Workers(cmd.Context())
			if err != nil {
				return err
			}
			v := apiView{doc: client.WorkerList{Workers: ws}, columns: []apiColumn{{name: "Worker ID"}, {name: "Status"},
				{name: "Concurrency"}, {name: "In Flight"}, {name: "Started"}, {name: "Heartbeat"}, {name: "Hostname", wide: true}, {name: "Version", wide: true}}}
			for _, w := range ws {
				v.names = append(v.names, w.WorkerID)
				v.rows = append(v.rows, []any{w.WorkerID, w.Status, w.Concurrency, w.InFlight, age(w.StartedAt), age(w.LastHeartbeat), w.Hostname, orUnknown(w.Version)})
			}
			return v.print(c, output, "No live workers in queue "+args[0]+".")
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", apiOutputHelp)
	return cmd
}
