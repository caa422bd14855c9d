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

package leaderelection

import (
	"net/http"
	"sync"
	"time"
)

// HealthzAdaptor reports, on a health endpoint, a leader that has failed to renew its lease
// without exiting, so that the kubelet restarts the process. It can be made before the
// elector it watches.
type HealthzAdaptor struct {
	pointerLock sync.Mutex
	le          *LeaderElector
	timeout     time.Duration
}

// Name returns the name of the health check.
func (l *HealthzAdaptor) Name() string {
	return "leaderElection"
}

// Check fails when this instance holds the lease but has not renewed it for longer than
// the lease duration plus the adaptor's timeout.
func (l *HealthzAdaptor) Check(req *http.Request) error {
	l.pointerLock.Lock()
	defer l.pointerLock.Unlock()
	if l.le == nil {
		return nil
	}
	return l.le.Check(l.timeout)
}

// SetLeaderElection ties an elector to the adaptor. NewLeaderElector calls it for the
// config's WatchDog.
func (l *HealthzAdaptor) SetLeaderElection(le *LeaderElector) {
	l.pointerLock.Lock()
	defer l.pointerLock.Unlock()
	l.le = le
}

// NewLeaderHealthzAdaptor creates a healthz adaptor for a leader election. timeout is how
// long past the lease's expiry a leader that has not renewed is still reported healthy.
func NewLeaderHealthzAdaptor(timeout time.Duration) *HealthzAdaptor {
	return &HealthzAdaptor{timeout: timeout}
}
