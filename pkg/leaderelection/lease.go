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
	"context"
	"encoding/json"
	"errors"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LeaderElectionRecord is the election state kept in the lock. Only its changes matter to
// the elector: timestamps written by other clients are never compared with the local clock.
type LeaderElectionRecord struct {
	// HolderIdentity is the ID that owns the lease. If empty, no one owns this lease and
	// all callers may acquire. It is set to empty when a client voluntarily steps down.
	HolderIdentity       string                                  `json:"holderIdentity"`
	LeaseDurationSeconds int                                     `json:"leaseDurationSeconds"`
	AcquireTime          metav1.Time                             `json:"acquireTime"`
	RenewTime            metav1.Time                             `json:"renewTime"`
	LeaderTransitions    int                                     `json:"leaderTransitions"`
	Strategy             coordinationv1.CoordinatedLeaseStrategy `json:"strategy"`
	PreferredHolder      string                                  `json:"preferredHolder"`
}

// Lock is the resource the election is held on (client-go's resourcelock.Interface, without
// events).
type Lock interface {
	// Get returns the record and its serialized form, which the elector compares to notice
	// that another client changed it.
	Get(ctx context.Context) (*LeaderElectionRecord, []byte, error)
	// Create creates the lock holding ler.
	Create(ctx context.Context, ler LeaderElectionRecord) error
	// Update replaces the record of the lock last read or created.
	Update(ctx context.Context, ler LeaderElectionRecord) error
	// Identity is this candidate's identity.
	Identity() string
	// Describe names the lock in logs and errors.
	Describe() string
}

// LeaseClient is what a LeaseLock needs of a namespaced Lease client. Both
// kubeclient.Leases and a clientset's CoordinationV1().Leases(namespace) provide it.
type LeaseClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// LeaseLock is a Lock on a coordination.k8s.io/v1 Lease.
type LeaseLock struct {
	// LeaseMeta names the Lease; Client must be a client of LeaseMeta.Namespace.
	LeaseMeta metav1.ObjectMeta
	Client    LeaseClient
	// LockIdentity uniquely identifies this candidate among all of the election's.
	LockIdentity string

	lease *coordinationv1.Lease
}

var _ Lock = &LeaseLock{}

// NewLeaseLock returns a lock on the Lease namespace/name, read and written through client
// (a client of that namespace), held as identity.
func NewLeaseLock(client LeaseClient, namespace, name, identity string) *LeaseLock {
	return &LeaseLock{
		LeaseMeta:    metav1.ObjectMeta{Namespace: namespace, Name: name},
		Client:       client,
		LockIdentity: identity,
	}
}

// Get returns the election record from the Lease's spec.
func (ll *LeaseLock) Get(ctx context.Context) (*LeaderElectionRecord, []byte, error) {
	lease, err := ll.Client.Get(ctx, ll.LeaseMeta.Name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	ll.lease = lease
	record := LeaseSpecToLeaderElectionRecord(&ll.lease.Spec)
	recordByte, err := json.Marshal(*record)
	if err != nil {
		return nil, nil, err
	}
	return record, recordByte, nil
}

// Create creates the Lease holding ler.
func (ll *LeaseLock) Create(ctx context.Context, ler LeaderElectionRecord) error {
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:      ll.LeaseMeta.Name,
			Namespace: ll.LeaseMeta.Namespace,
		},
		Spec: LeaderElectionRecordToLeaseSpec(&ler),
	}
	var err error
	ll.lease, err = ll.Client.Create(ctx, lease, metav1.CreateOptions{})
	return err
}

// Update replaces the spec of the Lease last read or created; a conflict means another
// client changed it since.
func (ll *LeaseLock) Update(ctx context.Context, ler LeaderElectionRecord) error {
	if ll.lease == nil {
		return errors.New("lease not initialized, call get or create first")
	}
	ll.lease.Spec = LeaderElectionRecordToLeaseSpec(&ler)
	lease, err := ll.Client.Update(ctx, ll.lease, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	ll.lease = lease
	return nil
}

// Describe names the Lease as namespace/name.
func (ll *LeaseLock) Describe() string {
	return fmt.Sprintf("%v/%v", ll.LeaseMeta.Namespace, ll.LeaseMeta.Name)
}

// Identity returns the identity this lock is held as.
func (ll *LeaseLock) Identity() string {
	return ll.LockIdentity
}

// LeaseSpecToLeaderElectionRecord reads the election record from a Lease spec.
func LeaseSpecToLeaderElectionRecord(spec *coordinationv1.LeaseSpec) *LeaderElectionRecord {
	var r LeaderElectionRecord
	if spec.HolderIdentity != nil {
		r.HolderIdentity = *spec.HolderIdentity
	}
	if spec.LeaseDurationSeconds != nil {
		r.LeaseDurationSeconds = int(*spec.LeaseDurationSeconds)
	}
	if spec.LeaseTransitions != nil {
		r.LeaderTransitions = int(*spec.LeaseTransitions)
	}
	if spec.AcquireTime != nil {
		r.AcquireTime = metav1.Time{Time: spec.AcquireTime.Time}
	}
	if spec.RenewTime != nil {
		r.RenewTime = metav1.Time{Time: spec.RenewTime.Time}
	}
	if spec.PreferredHolder != nil {
		r.PreferredHolder = *spec.PreferredHolder
	}
	if spec.Strategy != nil {
		r.Strategy = *spec.Strategy
	}
	return &r
}

// LeaderElectionRecordToLeaseSpec writes the election record as a Lease spec.
func LeaderElectionRecordToLeaseSpec(ler *LeaderElectionRecord) coordinationv1.LeaseSpec {
	leaseDurationSeconds := int32(ler.LeaseDurationSeconds)
	leaseTransitions := int32(ler.LeaderTransitions)
	spec := coordinationv1.LeaseSpec{
		HolderIdentity:       &ler.HolderIdentity,
		LeaseDurationSeconds: &leaseDurationSeconds,
		AcquireTime:          &metav1.MicroTime{Time: ler.AcquireTime.Time},
		RenewTime:            &metav1.MicroTime{Time: ler.RenewTime.Time},
		LeaseTransitions:     &leaseTransitions,
	}
	if ler.PreferredHolder != "" {
		spec.PreferredHolder = &ler.PreferredHolder
	}
	if ler.Strategy != "" {
		spec.Strategy = &ler.Strategy
	}
	return spec
}
