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

package controllers

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/dtq-dev/dtq/internal/testutil"
	"github.com/dtq-dev/dtq/pkg/broker"
)

var _ = Describe("Queue history", func() {
	It("samples every Queue's backlog and counters into its history, keeping the newest samples", func() {
		stopTheManager()
		const interval, samples = 100 * time.Millisecond, 5
		DeferCleanup(startManager(Options{History: HistoryOptions{Interval: interval, Samples: samples}}))
		ns := newNamespace("history")
		Expect(k8sClient.Create(ctx, testutil.MakeQueue("jobs", ns).Paused(true).Obj())).To(Succeed())
		ref := broker.QueueRef{Namespace: ns, Name: "jobs"}
		Eventually(func() error { _, err := engine.Submit(ctx, ref, broker.SubmitRequest{Type: "echo"}); return err }, timeout, poll).Should(Succeed())
		for range 2 {
			_, err := engine.Submit(ctx, ref, broker.SubmitRequest{Type: "echo"})
			Expect(err).NotTo(HaveOccurred())
		}

		Eventually(func(g Gomega) {
			h, err := engine.History(ctx, ref, time.Time{}, 100)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(h).To(HaveLen(samples))
			g.Expect(h[samples-1]).To(And(HaveField("Queued", int64(3)), HaveField("Submitted", int64(3))))
			for i := 1; i < samples; i++ {
				g.Expect(h[i].At).To(BeTemporally(">=", h[i-1].At))
			}
		}, timeout, poll).Should(Succeed())
		Expect(rdb.PTTL(ctx, broker.HistoryKey(ref)).Val()).To(BeNumerically("~", 2*samples*interval, interval))
	})
})
