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
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"
)

// apiOutputHelp is the -o of verbs that print the HTTP API's documents.
const apiOutputHelp = "Output format: wide, json, yaml (the HTTP API's documents) or name (the IDs) (default: a table)."

// apiView is what a verb prints of the HTTP API's answer: doc for json and
// yaml, names for -o name, and a table of columns (wide: those marked wide).
type apiView struct {
	doc     any
	names   []string
	columns []apiColumn
	rows    [][]any
}

type apiColumn struct {
	name string
	wide bool
}

// print prints the view for -o output; none names the kind when the table
// has no rows ("No dead letters found in queue x.", on stderr as kubectl does).
func (v apiView) print(c *cli, output, none string) error {
	w := c.streams.Out
	switch output {
	case "json":
		b, err := json.MarshalIndent(v.doc, "", "    ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(v.doc)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case "name":
		for _, n := range v.names {
			if _, err := fmt.Fprintln(w, n); err != nil {
				return err
			}
		}
		return nil
	case "", "wide":
		if len(v.rows) == 0 && none != "" {
			_, err := fmt.Fprintln(c.streams.ErrOut, none)
			return err
		}
		return printTable(w, v.table(), output == "wide", false)
	}
	return fmt.Errorf("-o %q: the HTTP API's documents print as wide, json, yaml or name", output)
}

// table is the view's table (its wide columns of priority 1).
func (v apiView) table() *metav1.Table {
	t := &metav1.Table{}
	for _, col := range v.columns {
		def := metav1.TableColumnDefinition{Name: col.name, Type: "string"}
		if col.wide {
			def.Priority = 1
		}
		t.ColumnDefinitions = append(t.ColumnDefinitions, def)
	}
	for _, r := range v.rows {
		t.Rows = append(t.Rows, metav1.TableRow{Cells: r})
	}
	return t
}

// age prints how long ago t was, as kubectl's AGE column; "<none>" for zero.
func age(t time.Time) string {
	if t.IsZero() {
		return "<none>"
	}
	return duration.HumanDuration(time.Since(t))
}
