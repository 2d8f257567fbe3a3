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

package httpapi

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/internal/version"
	"github.com/dtq-dev/dtq/pkg/broker"
	dtqclient "github.com/dtq-dev/dtq/pkg/client"
)

// VersionPath answers the versions of the cluster (RBAC get on this
// non-resource URL; config/api/version_reader_role.yaml grants it to every
// authenticated user).
const VersionPath = "/api/v1/version"

// serveVersion answers this replica's build, the builds the API replicas and
// managers record in Redis (broker.RunComponentRecord), and the builds of
// the workers of every queue Options.Queues lists.
func (s *Server) serveVersion(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.authorize(w, r, Attributes{Verb: "get", Path: VersionPath}); !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.RequestTimeout)
	defer cancel()
	comps, err := s.b.Components(ctx)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var apis, managers, workers []version.Info
	for _, c := range comps {
		info := version.Info{Version: c.Version, Commit: c.Commit}
		switch c.Component {
		case broker.ComponentAPI:
			apis = append(apis, info)
		case broker.ComponentManager:
			managers = append(managers, info)
		}
	}
	if s.opts.Queues != nil {
		qs, err := s.opts.Queues(ctx)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		ws, err := s.b.WorkersOf(ctx, qs)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		for _, wk := range ws {
			workers = append(workers, version.Info{Version: wk.Version, Commit: wk.Commit})
		}
	}
	writeJSON(w, http.StatusOK, dtqclient.ServerVersion{Version: version.Version, Commit: version.Commit,
		APIs: countBuilds(apis), Managers: countBuilds(managers), Workers: countBuilds(workers)})
}

// countBuilds counts the processes of each build, the build most run first
// (then by version and commit, for a stable order).
func countBuilds(infos []version.Info) []dtqclient.BuildCount {
	n := map[version.Info]int{}
	for _, i := range infos {
		n[i]++
	}
	out := make([]dtqclient.BuildCount, 0, len(n))
	for i, c := range n {
		out = append(out, dtqclient.BuildCount{Version: i.Version, Commit: i.Commit, Count: c})
	}
	slices.SortFunc(out, func(a, b dtqclient.BuildCount) int {
		return cmp.Or(b.Count-a.Count, cmp.Compare(a.Version, b.Version), cmp.Compare(a.Commit, b.Commit))
	})
	return out
}

// KubernetesQueues returns an Options.Queues that lists the Queues of every
// namespace with c (the API's own identity, which needs list on
// queues.dtq.dev), reading their metadata only.
func KubernetesQueues(c client.Reader) func(context.Context) ([]broker.QueueRef, error) {
	return func(ctx context.Context) ([]broker.QueueRef, error) {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(dtqv1alpha1.GroupVersion.WithKind("QueueList"))
		if err := c.List(ctx, list); err != nil {
			return nil, &dtqclient.Error{StatusCode: http.StatusInternalServerError, Code: dtqclient.CodeInternal,
				Message: fmt.Sprintf("list Queues: %v", err)}
		}
		qs := make([]broker.QueueRef, len(list.Items))
		for i, q := range list.Items {
			qs[i] = broker.QueueRef{Namespace: q.Namespace, Name: q.Name}
		}
		return qs, nil
	}
}
