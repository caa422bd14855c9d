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

package fleet

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	homelabv1 "github.com/youngju-dev/gpu-inventory-operator/pkg/apis/homelab/v1"
)

// maxNamed bounds the members a condition's message names.
const maxNamed = 5

// conditions are MembersUnreachable, MembersStale, DuplicateMembers and Truncated, each
// naming the members it is about (the first few by name).
func conditions(rows []homelabv1.FleetMember, listed int, generation int64) []metav1.Condition {
	var unreachable, stale, duplicate []string
	for _, r := range rows {
		switch r.State {
		case homelabv1.MemberUnreachable:
			unreachable = append(unreachable, fmt.Sprintf("%s (%s)", r.Name, r.Reason))
		case homelabv1.MemberStale:
			unreachable = append(unreachable, fmt.Sprintf("%s (%s)", r.Name, r.Reason))
			since := ""
			if r.Since != nil {
				since = " since " + r.Since.UTC().Format("2006-01-02T15:04:05Z")
			}
			stale = append(stale, r.Name+since)
		case homelabv1.MemberDuplicate:
			duplicate = append(duplicate, r.Name+": "+r.Message)
		}
	}
	total := len(rows)
	return []metav1.Condition{
		condition(homelabv1.ConditionMembersUnreachable, generation, unreachable,
			homelabv1.ReasonMembersReachable, fmt.Sprintf("all %d members can be read", total-len(duplicate)),
			fmt.Sprintf("%d of %d members cannot be read: ", len(unreachable), total-len(duplicate))),
		condition(homelabv1.ConditionMembersStale, generation, stale,
			homelabv1.ReasonMembersFresh, "no member has been unreachable for longer than spec.staleAfter",
			fmt.Sprintf("%d members have been unreachable for longer than spec.staleAfter; their last-known GPUs are out of the totals: ", len(stale))),
		condition(homelabv1.ConditionDuplicateMembers, generation, duplicate,
			homelabv1.ReasonNoDuplicates, "no two members are one cluster",
			fmt.Sprintf("%d members are another member's cluster again: ", len(duplicate))),
		truncated(total, listed, generation),
	}
}

// condition is True, with the type as its reason, when names is not empty.
func condition(typ string, generation int64, names []string, falseReason, falseMessage, truePrefix string) metav1.Condition {
	c := metav1.Condition{Type: typ, ObservedGeneration: generation, Status: metav1.ConditionFalse, Reason: falseReason, Message: falseMessage}
	if len(names) > 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, typ, truePrefix+named(names)
	}
	return c
}

func truncated(total, listed int, generation int64) metav1.Condition {
	c := metav1.Condition{Type: homelabv1.ConditionTruncated, ObservedGeneration: generation, Status: metav1.ConditionFalse,
		Reason: homelabv1.ReasonAllMembersListed, Message: fmt.Sprintf("status.members lists all %d members", total)}
	if listed < total {
		c.Status, c.Reason = metav1.ConditionTrue, homelabv1.ReasonMembersOmitted
		c.Message = fmt.Sprintf("status.members lists %d of %d members (problem members first); %d were left out to bound the object's size. Totals count every member.",
			listed, total, total-listed)
	}
	return c
}

// named lists the first maxNamed names and counts the rest.
func named(names []string) string {
	if len(names) <= maxNamed {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:maxNamed], ", ") + fmt.Sprintf(" and %d more", len(names)-maxNamed)
}
