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

package quotacache

import (
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// What the cache reads, as a Problem names it.
const (
	quotaKey = "core/v1 resourcequotas"
	crdKey   = "apiextensions.k8s.io/v1 customresourcedefinitions " + CRDName
)

// problem is why one thing cannot be read.
type problem struct {
	forbidden bool
	reason    string // when not forbidden: the error's first line
}

// maxReason bounds an error's text in a Problem.
const maxReason = 200

func problemOf(err error) problem {
	if apierrors.IsForbidden(err) {
		return problem{forbidden: true}
	}
	reason, _, _ := strings.Cut(err.Error(), "\n")
	if len(reason) > maxReason {
		reason = reason[:maxReason] + "..."
	}
	return problem{reason: reason}
}

// problemLine is the Problem of a snapshot: what is forbidden, in one clause, then each
// other failure.
func problemLine(problems map[string]problem) string {
	var forbidden, failing []string
	for _, key := range slices.Sorted(maps.Keys(problems)) {
		if p := problems[key]; p.forbidden {
			forbidden = append(forbidden, key)
		} else {
			failing = append(failing, "cannot list "+key+": "+p.reason)
		}
	}
	if len(forbidden) > 0 {
		failing = append([]string{"cannot list " + strings.Join(forbidden, ", ") +
			": forbidden; grant get/list/watch (see docs/install.md)"}, failing...)
	}
	return strings.Join(failing, "; ")
}

// setProblem records (or, with ok false, clears) key's problem; a change is logged once and
// told to the listeners.
func (c *Cache) setProblem(ctx context.Context, key string, p problem, ok bool) {
	c.mu.Lock()
	old, had := c.problems[key]
	if had == ok && old == p {
		c.mu.Unlock()
		return
	}
	if ok {
		c.problems[key] = p
	} else {
		delete(c.problems, key)
	}
	c.dirty = true
	c.mu.Unlock()
	switch {
	case !ok:
		logger(ctx).Info("Reading again", "what", key)
	case p.forbidden:
		logger(ctx).Info("Cannot read: forbidden; grant get/list/watch (see docs/install.md)", "what", key)
	default:
		logger(ctx).Info("Cannot read", "what", key, "reason", p.reason)
	}
	for _, f := range c.listeners {
		f("")
	}
}

// checked is lw, clearing key's problem whenever a list or a watch is accepted.
func (c *Cache) checked(key string, lw cache.ListerWatcher) cache.ListerWatcher {
	inner := cache.ToListerWatcherWithContext(lw)
	out := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			obj, err := inner.ListWithContext(ctx, opts)
			if err == nil {
				c.setProblem(ctx, key, problem{}, false)
			}
			return obj, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := inner.WatchWithContext(ctx, opts)
			if err == nil {
				c.setProblem(ctx, key, problem{}, false)
			}
			return w, err
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(out, lw)
}

// watchError is the informer's handler of failed lists and watches: an API server's refusal
// (forbidden above all) is key's problem, as is any failure before the first list; a watch
// that ends or expires, a later broken connection and, when told, NotFound are the
// reflector's to retry.
func (c *Cache) watchError(key string, synced func() bool, ignoreNotFound bool) cache.WatchErrorHandlerWithContext {
	return func(ctx context.Context, _ *cache.Reflector, err error) {
		var status apierrors.APIStatus
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
			apierrors.IsResourceExpired(err), apierrors.IsGone(err):
			return
		case ignoreNotFound && apierrors.IsNotFound(err):
			logger(ctx).V(4).Info("Not found", "what", key)
			return
		case !errors.As(err, &status) && synced():
			logger(ctx).V(1).Info("Watch ended", "what", key, "err", err)
			return
		}
		c.setProblem(ctx, key, problemOf(err), true)
	}
}
