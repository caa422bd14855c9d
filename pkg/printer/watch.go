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

package printer

import (
	"fmt"
	"io"
	"strings"
	"time"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// What `kubectl gpuinv --watch` prints: on a terminal a screen redrawn on each change, else
// a line per change.

// ClearScreen moves the cursor home and clears the terminal.
const ClearScreen = "\x1b[H\x1b[2J"

// WatchScreen clears the terminal and prints the report of a followed inventory.
func WatchScreen(w io.Writer, gi *homelabv1.GpuInventory, opts Options) error {
	var b strings.Builder
	b.WriteString(ClearScreen)
	if err := Report(&b, gi, opts); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\nWatching GpuInventory %s (Ctrl-C to stop).\n", gi.Name)
	_, err := io.WriteString(w, b.String())
	return err
}

// WatchDeleted says that the followed inventory was deleted: a screen, or a line.
func WatchDeleted(w io.Writer, name string, terminal bool) error {
	if terminal {
		_, err := fmt.Fprintf(w, "%sGpuInventory %s was deleted; waiting for it to be created again (Ctrl-C to stop).\n", ClearScreen, name)
		return err
	}
	_, err := fmt.Fprintf(w, "- %s: deleted\n", name)
	return err
}

// FleetWatchScreen clears the terminal and prints the fleet report of followed inventories.
func FleetWatchScreen(w io.Writer, f Fleet, opts Options) error {
	var b strings.Builder
	b.WriteString(ClearScreen)
	if err := FleetReport(&b, f, opts); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\nWatching GpuInventory %s in %d contexts (Ctrl-C to stop).\n", f.Name, len(f.Clusters))
	_, err := io.WriteString(w, b.String())
	return err
}

// FleetProblemLine says that a followed cluster cannot be read.
func FleetProblemLine(context, problem string, at time.Time) string {
	return fmt.Sprintf("%s [%s] %s; retrying", at.UTC().Format(time.RFC3339), context, problem)
}

// FleetReconnectedLine says that a followed cluster answers again.
func FleetReconnectedLine(context string, at time.Time) string {
	return fmt.Sprintf("%s [%s] reconnected", at.UTC().Format(time.RFC3339), context)
}

// FleetDeletedLine says that a followed cluster's inventory was deleted.
func FleetDeletedLine(context, name string) string {
	return fmt.Sprintf("- [%s] %s: deleted", context, name)
}

// FleetUnreadLine says that a followed cluster could not be read since at, and is not retried.
func FleetUnreadLine(context, problem string, at time.Time) string {
	return fmt.Sprintf("%s [%s] %s", at.UTC().Format(time.RFC3339), context, problem)
}
