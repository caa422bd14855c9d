package app

import "testing"

func TestNotReady(t *testing.T) {
	opts := NewOptions()
	o := &Operator{opts: opts}
	if why := o.notReady(); why == "" {
		t.Error("an operator whose controllers have not started must not be ready")
	}
	opts.LeaderElect = true
	if why := o.notReady(); why != "" {
		t.Errorf("a standby has nothing to sync and is ready, got %q", why)
	}
	o.leading.Store(true)
	if why := o.notReady(); why == "" {
		t.Error("a new leader whose controllers have not started must not be ready")
	}
}
