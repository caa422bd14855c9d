#!/usr/bin/env bash
# Fails when a Go file does not open with the licence notice in hack/boilerplate.go.txt
# (the notice code-generator writes into the generated code), after its build constraints.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

lines=$(wc -l < hack/boilerplate.go.txt)
status=0
while IFS= read -r -d '' f; do
  # The file's first lines after its build constraints and the blank lines around them.
  head=$(awk -v n="$lines" '!body && (/^\/\/(go:build| \+build)/ || /^$/) {next} {body=1; print; if (++k == n) exit}' "$f")
  if [[ "$head" != "$(cat hack/boilerplate.go.txt)" ]]; then
    echo "$f: does not start with the notice in hack/boilerplate.go.txt" >&2
    status=1
  fi
done < <(git ls-files -z --cached --others --exclude-standard '*.go')
exit $status
