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

package memberwatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	"github.com/youngju-dev/gpu-inventory-operator/pkg/member"
)

// Source is one object of the hub that names a member: a ClusterProfile, or a
// MultiKueueCluster (with Kueue's namespace, where what it names is).
type Source struct {
	ClusterProfile    *v1alpha1.ClusterProfile
	MultiKueueCluster *unstructured.Unstructured
	KueueNamespace    string
}

// FromClusterProfile is the source of a ClusterProfile.
func FromClusterProfile(cp *v1alpha1.ClusterProfile) Source { return Source{ClusterProfile: cp} }

// FromMultiKueueCluster is the source of a MultiKueueCluster whose Secrets and profiles are
// in kueueNamespace.
func FromMultiKueueCluster(mkc *unstructured.Unstructured, kueueNamespace string) Source {
	return Source{MultiKueueCluster: mkc, KueueNamespace: kueueNamespace}
}

// Name is the member's name in a fleet: a ClusterProfile's namespace/name, a
// MultiKueueCluster's name.
func (s Source) Name() string {
	if s.ClusterProfile != nil {
		return s.ClusterProfile.Namespace + "/" + s.ClusterProfile.Name
	}
	return s.MultiKueueCluster.GetName()
}

// key tells the two kinds apart in the registry's maps.
func (s Source) key() string {
	if s.ClusterProfile != nil {
		return "ClusterProfile " + s.Name()
	}
	return "MultiKueueCluster " + s.KueueNamespace + "/" + s.Name()
}

// resolved is the config a source gave, for the version of the objects it was read from.
type resolved struct {
	version     string
	config      *rest.Config
	fingerprint string // of config
	err         error
	// since is when the source first failed as it fails now.
	since time.Time
	// reread: the credentials were refused (401); read what the source names again, in
	// case a Secret was rotated in place.
	reread bool
}

// resolver builds members' configs from their sources, as MultiKueue would.
type resolver struct {
	reader member.Reader
}

// version identifies what a source's config is made of: the object, and for a
// MultiKueueCluster that names a ClusterProfile, that profile too.
func (r resolver) version(s Source) string {
	if s.ClusterProfile != nil {
		return string(s.ClusterProfile.UID) + "/" + s.ClusterProfile.ResourceVersion
	}
	v := string(s.MultiKueueCluster.GetUID()) + "/" + s.MultiKueueCluster.GetResourceVersion()
	if mkc, err := member.MultiKueueClusterOf(s.MultiKueueCluster); err == nil && mkc.ClusterProfile != "" {
		if cp, err := r.reader.ClusterProfile(context.Background(), s.KueueNamespace, mkc.ClusterProfile); err == nil {
			v += " ClusterProfile " + string(cp.UID) + "/" + cp.ResourceVersion
		}
	}
	return v
}

// config builds the source's config; a Secret it names is read (get by name).
func (r resolver) config(ctx context.Context, s Source) (*rest.Config, error) {
	if s.ClusterProfile != nil {
		return r.reader.ForClusterProfile(s.ClusterProfile)
	}
	mkc, err := member.MultiKueueClusterOf(s.MultiKueueCluster)
	if err != nil {
		return nil, err
	}
	return r.reader.ForMultiKueueCluster(ctx, s.KueueNamespace, mkc)
}

// fingerprint identifies what a config connects to and with which credentials: a member
// whose fingerprint changes is read again from scratch.
func fingerprint(cfg *rest.Config) string {
	type exec struct {
		Command, APIVersion string
		Args                []string
		Env                 []string
		ClusterConfig       string
	}
	v := struct {
		Host, ServerName, Token string
		CA, Cert, Key           []byte
		Exec                    *exec
		Proxy                   bool
	}{Host: cfg.Host, ServerName: cfg.ServerName, Token: cfg.BearerToken, CA: cfg.CAData, Cert: cfg.CertData, Key: cfg.KeyData,
		Proxy: cfg.Proxy != nil}
	if e := cfg.ExecProvider; e != nil {
		v.Exec = &exec{Command: e.Command, APIVersion: e.APIVersion, Args: e.Args}
		for _, env := range e.Env {
			v.Exec.Env = append(v.Exec.Env, env.Name+"="+env.Value)
		}
		if e.Config != nil {
			data, _ := json.Marshal(e.Config)
			v.Exec.ClusterConfig = string(data)
		}
	}
	data, err := json.Marshal(&v)
	if err != nil {
		return fmt.Sprintf("unencodable %p", cfg)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
