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

package claimcache

import "github.com/youngju-dev/gpu-inventory-operator/pkg/allocation"

// Name names the source.
func (*Cache) Name() string { return "resourceclaims" }

// OnChange registers f with the tracker the cache feeds: its changes are the tracker's.
func (c *Cache) OnChange(f func(key string)) { c.store.tracker.OnChange(f) }

// Tracker is the tracker the cache feeds.
func (c *Cache) Tracker() *allocation.Tracker { return c.store.tracker }
