//go:build integration

/*
Copyright The gpu-inventory-operator Authors.

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

package integration

import (
	"bytes"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// subprocessOperator runs the operator binary with the admin kubeconfig and leader election.
type subprocessOperator struct {
	cmd     *exec.Cmd
	output  *bytes.Buffer
	exited  chan struct{} // closed when the process has exited
	exitErr error
}

func startSubprocessOperator(t *testing.T, c *cluster, extraArgs ...string) *subprocessOperator {
	t.Helper()
	args := append([]string{"--kubeconfig=" + c.env.KubeconfigPath(), "--namespace=" + operatorNamespace, "--leader-elect",
		"--metrics-bind-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0"}, extraArgs...)
	cmd := exec.Command(operatorBinary, args...)
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &subprocessOperator{cmd: cmd, output: out, exited: make(chan struct{})}
	go func() { p.exitErr = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("operator process output:\n%s", out.String())
		}
	})
	return p
}

// waitLeader waits until the Lease is held by someone and returns the holder.
func (c *cluster) waitLeader(t *testing.T, timeout time.Duration, want func(string) bool) string {
	t.Helper()
	var got string
	eventually(t, timeout, "lease holder", func() error {
		got = c.leaseHolder(t)
		if !want(got) {
			return fmt.Errorf("holder is %q", got)
		}
		return nil
	})
	return got
}

func TestLeaderElectionGracefulHandover(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)

	first := startSubprocessOperator(t, c)
	leader := c.waitLeader(t, 30*time.Second, func(h string) bool { return h != "" })
	c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})

	opts := testOptions()
	opts.LeaderElect = true
	standby := startOperator(t, c.env.Config, opts)
	if leader == standby.Identity() {
		t.Fatalf("the standby, started second, holds the lease")
	}
	// The leader writes; the standby, which watches nothing yet, writes nothing.
	c.setReady(t, "nuc1", corev1.ConditionTrue)
	c.waitTotals(t, "cluster", totals{Nodes: 4, ReadyNodes: 1, Gpus: 1, ReadyGpus: 1})
	if w := statusWrites(standby); w != 0 {
		t.Fatalf("standby made %d status writes while another instance led", w)
	}
	if h := c.leaseHolder(t); h != leader {
		t.Fatalf("lease moved from %s to %s without a reason", leader, h)
	}

	// SIGTERM: the leader exits 0 and releases the lease. Its controllers get up to the
	// renew deadline to finish before the lease is released; the standby then takes over
	// at its next retry.
	signalled := time.Now()
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exitWithin := opts.RenewDeadline + 2*time.Second
	select {
	case <-first.exited:
		if first.exitErr != nil {
			t.Errorf("leader exited with %v after SIGTERM, want exit status 0", first.exitErr)
		}
	case <-time.After(exitWithin):
		t.Fatalf("leader still running %s after SIGTERM", exitWithin)
	}
	exited := time.Now()
	c.waitLeader(t, 3*opts.RetryPeriod, func(h string) bool { return h == standby.Identity() })
	t.Logf("leader exited %s after SIGTERM, standby took over %s after that", exited.Sub(signalled).Round(time.Millisecond),
		time.Since(exited).Round(time.Millisecond))

	c.setReady(t, "nuc1", corev1.ConditionFalse)
	c.waitTotals(t, "cluster", totals{Nodes: 4, ReadyNodes: 0, Gpus: 1, ReadyGpus: 0})
	if statusWrites(standby) == 0 {
		t.Errorf("the new leader reports no status write, yet the status changed")
	}
}

func TestLeaderElectionLeaderDiesWithoutReleasing(t *testing.T) {
	c := startCluster(t)
	c.loadHomeLab(t)

	first := startSubprocessOperator(t, c)
	dead := c.waitLeader(t, 30*time.Second, func(h string) bool { return h != "" })
	c.waitTotals(t, "cluster", totals{Nodes: 4, Gpus: 1})

	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.exited
	killed := time.Now()
	if h := c.leaseHolder(t); h != dead {
		t.Fatalf("a killed leader cannot release its lease, yet the holder is %q", h)
	}

	opts := testOptions()
	opts.LeaderElect = true
	successor := startOperator(t, c.env.Config, opts)
	lease := opts.LeaseDuration
	c.waitLeader(t, lease+3*opts.RetryPeriod, func(h string) bool { return h == successor.Identity() })
	waited := time.Since(killed)
	t.Logf("successor took over %s after the leader died (lease duration %s)", waited.Round(time.Millisecond), lease)
	if waited < lease-opts.RenewDeadline {
		t.Errorf("successor took over after %s, before the dead leader's lease (%s) could have expired", waited, lease)
	}

	c.setReady(t, "omen", corev1.ConditionTrue)
	c.waitTotals(t, "cluster", totals{Nodes: 4, ReadyNodes: 1, Gpus: 1})
}
