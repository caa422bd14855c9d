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

package dispatch

import (
	"fmt"
	"strings"
)

// hist counts nodes by their free whole GPUs: hist[k] nodes have exactly k free, k ≥ 1
// (hist[0] is unused). Its last bucket also holds the nodes with more free than the status
// counts (freeNodes' cap), which only makes a pod that fits look as if it did not.
type hist []int32

// histOf reads a status freeNodes list (freeNodes[k-1]: nodes with k free).
func histOf(freeNodes []int32) hist {
	h := make(hist, len(freeNodes)+1)
	for i, n := range freeNodes {
		h[i+1] = max(n, 0)
	}
	return h
}

func (h hist) clone() hist { return append(hist(nil), h...) }

// move is count nodes that had from free GPUs and gave used of them to pods.
type move struct{ from, used, count int }

// place puts pods pods of g GPUs each on h, as fit -f places replicas: each pod on the node
// with the fewest free that still takes it. It returns how many were placed, the free GPUs
// left on the nodes it took, and the moves made; h changes only when all are placed.
func (h hist) place(pods int64, g int) (placed, left int64, moves []move) {
	if g <= 0 || pods <= 0 {
		return pods, 0, nil
	}
	work := h.clone()
	remaining := pods
	for k := g; k < len(work) && remaining > 0; k++ {
		if work[k] == 0 {
			continue
		}
		per := int64(k / g)
		need := (remaining + per - 1) / per
		take := min(int64(work[k]), need)
		full := take
		lastPods := per
		if take*per > remaining {
			full, lastPods = take-1, remaining-(take-1)*per
		}
		work[k] -= int32(take)
		if full > 0 {
			work.add(k%g, int32(full))
			moves = append(moves, move{from: k, used: int(per) * g, count: int(full)})
			left += full * int64(k%g)
		}
		if full < take {
			rest := k - int(lastPods)*g
			work.add(rest, 1)
			moves = append(moves, move{from: k, used: int(lastPods) * g, count: 1})
			left += int64(rest)
		}
		remaining -= min(take*per, remaining)
	}
	placed = pods - remaining
	if remaining == 0 {
		copy(h, work)
	}
	return placed, left, moves
}

func (h hist) add(k int, n int32) {
	if k > 0 && k < len(h) {
		h[k] += n
	}
}

// apply makes on h the moves made on another count of the same nodes (a domain's or the
// model's, whose caps may differ): each node taken from the smallest bucket that holds one.
func (h hist) apply(moves []move) {
	for _, m := range moves {
		for range m.count {
			b := m.from
			for b < len(h) && h[b] == 0 {
				b++
			}
			if b == len(h) {
				b = len(h) - 1
				for b > 0 && h[b] == 0 {
					b--
				}
				if b == 0 {
					break
				}
			}
			h[b]--
			h.add(b-m.used, 1)
		}
	}
}

// takes is how many pods of g GPUs h takes.
func (h hist) takes(g int) int64 {
	var n int64
	for k := g; k < len(h); k++ {
		n += int64(h[k]) * int64(k/g)
	}
	return n
}

// String is the nodes by free GPUs, the most free first: "2 with 8, 3 with 4"; "none".
func (h hist) String() string {
	var parts []string
	for k := len(h) - 1; k >= 1 && len(parts) < 4; k-- {
		if h[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d with %d", h[k], k))
		}
	}
	if len(parts) == 0 {
		return "no node has a free GPU"
	}
	return strings.Join(parts, ", ") + " free"
}
