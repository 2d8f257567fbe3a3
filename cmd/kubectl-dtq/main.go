// Command kubectl-dtq is dtq's command-line tool. Named kubectl-dtq, it is
// also a kubectl plugin: `kubectl dtq dev`.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{
		Use:           "kubectl-dtq",
		Short:         "dtq, the Kubernetes-native task queue: local dev stack and tools",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newDevCommand(), newUICommand())
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "kubectl-dtq:", err)
		os.Exit(1)
	}
}
