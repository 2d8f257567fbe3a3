package broker

import "testing"

func TestSmokeLifecycle(t *testing.T) {
	e := newEnv(t)
	ti := e.mustSubmit(SubmitRequest{IdempotencyKey: "k", Payload: raw(`{"a": 1}`), Priority: 5})
	if ti.State != StateQueued {
		t.Fatalf("state %s", ti.State)
	}
	d, run := e.deliver("c1")
	if run.ID != ti.ID || run.State != StateRunning {
		t.Fatalf("run %+v", run)
	}
	if s := e.complete(d, Outcome{Result: raw(`{"ok":true}`)}); s != StateSucceeded {
		t.Fatalf("state %s", s)
	}
	got := e.task(ti.ID)
	if string(got.Result) != `{"ok":true}` || got.State != StateSucceeded {
		t.Fatalf("%+v", got)
	}
	if r := e.record("k"); r.State != IdempotencyCompleted || r.TaskID != ti.ID {
		t.Fatalf("%+v", r)
	}
	st, err := e.b.Stats(ctx, e.q)
	if err != nil || st.Depth != 0 {
		t.Fatalf("%+v %v", st, err)
	}
}
