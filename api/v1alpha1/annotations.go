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

package v1alpha1

// AnnotationTraceParent on a Task is the W3C traceparent of the span that
// created it (e.g. a CI job's): the Task's dtq.submit span and the worker's
// dtq.start and dtq.complete spans join that trace (docs/observability.md).
const AnnotationTraceParent = "dtq.dev/traceparent"
