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
	"context"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	dtqv1alpha1 "github.com/dtq-dev/dtq/api/v1alpha1"
	"github.com/dtq-dev/dtq/pkg/broker"
	"github.com/dtq-dev/dtq/pkg/client"
)

// KubernetesPauser returns an Options.PauseQueue that merge-patches the
// Queue's spec.paused with c (the API's own identity, which needs patch on
// queues.dtq.dev; the caller's right to patch was checked before).
func KubernetesPauser(c ctrlclient.Client) func(context.Context, broker.QueueRef, bool) error {
	return func(ctx context.Context, q broker.QueueRef, paused bool) error {
		obj := &dtqv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Namespace: q.Namespace, Name: q.Name}}
		patch := fmt.Appendf(nil, `{"spec":{"paused":%t}}`, paused)
		err := c.Patch(ctx, obj, ctrlclient.RawPatch(types.MergePatchType, patch))
		if apierrors.IsNotFound(err) {
			return &client.Error{StatusCode: http.StatusNotFound, Code: client.CodeQueueNotFound,
				Message: "Queue " + q.String() + " not found"}
		}
		if err != nil {
			return &client.Error{StatusCode: http.StatusInternalServerError, Code: client.CodeInternal,
				Message: fmt.Sprintf("patch spec.paused of Queue %s: %v", q, err)}
		}
		return nil
	}
}
