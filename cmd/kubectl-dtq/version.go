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
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/dtq-dev/dtq/internal/version"
	"github.com/dtq-dev/dtq/pkg/client"
)

// versions is what `kubectl dtq version -o json|yaml` prints.
type versions struct {
	Client version.Info          `json:"clientVersion"`
	Server *client.ServerVersion `json:"serverVersion,omitempty"`
}

func newVersionCommand(c *cli) *cobra.Command {
	var output string
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Versions of kubectl-dtq and of the cluster's API, managers and workers",
		Long: `version prints kubectl-dtq's version and commit (the line of --version),
then, from the dtq HTTP API (GET /api/v1/version), the version of the API
replica that answered and the builds the running API replicas, managers and
workers report, with how many run each. It warns on stderr when versions run
together outside the version-skew policy of docs/upgrade.md: components more
than one minor release apart, or kubectl-dtq more than one minor release from
the server. Without an API it prints the client's version and says why the
server's is missing; either way it exits 0.`,
		Example: `  kubectl dtq version
  kubectl dtq version --client
  kubectl dtq version -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" && output != "yaml" {
				return fmt.Errorf("-o %q: version prints as json or yaml, or a table by default", output)
			}
			v := versions{Client: version.Get()}
			var serverErr error
			if !clientOnly {
				api, err := c.apiClient()
				if err == nil {
					v.Server, err = api.ServerVersion(cmd.Context())
				}
				serverErr = err
			}
			if err := printVersions(c.streams.Out, v, output); err != nil {
				return err
			}
			errOut := c.streams.ErrOut
			if serverErr != nil {
				_, _ = fmt.Fprintf(errOut, "No server version from the dtq HTTP API: %v\n", serverErr)
				if hint := apiTokenHint(serverErr); hint != "" {
					_, _ = fmt.Fprintln(errOut, hint)
				}
			}
			if v.Server != nil {
				for _, w := range skewWarnings(v.Client.Version, v.Server) {
					_, _ = fmt.Fprintln(errOut, "WARNING: "+w)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "Print kubectl-dtq's version only (no call to the API).")
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json or yaml (default: a table).")
	return cmd
}

// printVersions prints v as json, yaml or, by default, the Client: and
// Server: lines (each as --version prints it) and a table of the builds the
// cluster reports.
func printVersions(w io.Writer, v versions, output string) error {
	switch output {
	case "json":
		b, err := json.MarshalIndent(v, "", "    ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	line := func(i version.Info) string { return fmt.Sprintf("dtq %s (commit %s)", i.Version, i.Commit) }
	if _, err := fmt.Fprintln(w, "Client: "+line(v.Client)); err != nil {
		return err
	}
	s := v.Server
	if s == nil {
		return nil
	}
	if _, err := fmt.Fprintln(w, "Server: "+line(version.Info{Version: s.Version, Commit: s.Commit})); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(tw, "COMPONENT\tVERSION\tCOMMIT\tCOUNT")
	for _, g := range componentGroups(s) {
		if len(g.builds) == 0 {
			_, _ = fmt.Fprintf(tw, "%s\t<none>\t\t0\n", g.name)
		}
		for _, b := range g.builds {
			_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", g.name, orUnknown(b.Version), orUnknown(b.Commit), b.Count)
		}
	}
	return tw.Flush()
}

type componentGroup struct {
	name   string
	builds []client.BuildCount
}

func componentGroups(s *client.ServerVersion) []componentGroup {
	return []componentGroup{{"api", s.APIs}, {"manager", s.Managers}, {"worker", s.Workers}}
}

// orUnknown prints a version or commit that a component older than 0.1.0 did
// not report.
func orUnknown(s string) string {
	if s == "" {
		return "<unknown>"
	}
	return s
}

// skewWarnings lists what runs together outside the version-skew policy
// (version.WithinSkew): two component versions more than one minor release
// apart, the CLI more than one minor release from the answering API, and
// components that report no version (older than 0.1.0) or one that is not
// semantic.
func skewWarnings(clientVersion string, s *client.ServerVersion) []string {
	var out []string
	if ok, err := version.WithinSkew(clientVersion, s.Version); err != nil {
		out = append(out, fmt.Sprintf("cannot compare kubectl-dtq %s with the server's %s: %v", clientVersion, s.Version, err))
	} else if !ok {
		out = append(out, fmt.Sprintf("kubectl-dtq %s and the server's %s are more than %d minor release apart, outside the version-skew policy (docs/upgrade.md)",
			clientVersion, s.Version, version.MaxMinorSkew))
	}
	type seen struct{ component, version string }
	var all []seen
	for _, g := range componentGroups(s) {
		for _, b := range g.builds {
			if _, err := version.WithinSkew(b.Version, b.Version); err != nil {
				out = append(out, fmt.Sprintf("%d %s process(es) report version %q: older than 0.1.0 or not a release", b.Count, g.name, b.Version))
				continue
			}
			all = append(all, seen{g.name, b.Version})
		}
	}
	for i, a := range all {
		for _, b := range all[i+1:] {
			if ok, _ := version.WithinSkew(a.version, b.version); !ok {
				out = append(out, fmt.Sprintf("%s %s and %s %s run together more than %d minor release apart, outside the version-skew policy (docs/upgrade.md)",
					a.component, a.version, b.component, b.version, version.MaxMinorSkew))
			}
		}
	}
	return out
}
