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

package testenv

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// StartSharingEtcd starts another cluster on e's etcd: a kube-apiserver of its own (port,
// certificates, service-account key, admin token) whose objects live under etcd key prefix
// (kube-apiserver's --etcd-prefix; e's own server uses /registry), so that the two clusters
// see nothing of each other. It costs one kube-apiserver instead of a whole control plane.
// opts.BinDir and opts.Dir default as in Start; Stop stops the server only, and the cluster
// lasts as long as e's etcd.
func (e *Env) StartSharingEtcd(ctx context.Context, prefix string, opts Options) (env *Env, err error) {
	if e.etcd == nil || !e.etcd.running() {
		return nil, errors.New("the environment's etcd is not running")
	}
	if !strings.HasPrefix(prefix, "/") || prefix == "/registry" {
		return nil, fmt.Errorf("etcd prefix %q: want an absolute key prefix other than /registry", prefix)
	}
	s := &Env{binDir: opts.BinDir, Dir: opts.Dir, startTimeout: opts.StartTimeout, etcdURL: e.etcdURL,
		apiArgs: append([]string{"--etcd-prefix=" + prefix}, opts.APIServerArgs...), schedArgs: opts.SchedulerArgs}
	if s.binDir == "" {
		s.binDir = e.binDir
	}
	if s.startTimeout == 0 {
		s.startTimeout = e.startTimeout
	}
	err = s.setUp(ctx, func(ctx context.Context) error {
		if err := s.choosePorts(); err != nil {
			return err
		}
		return s.StartAPIServer(ctx)
	})
	if err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}
