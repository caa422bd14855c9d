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

package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// SumFile is the hex SHA-256 of the file at path.
func SumFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// SumFiles maps each of names, files in dir, to its SHA-256.
func SumFiles(dir string, names []string) (map[string]string, error) {
	sums := make(map[string]string, len(names))
	for _, n := range names {
		sum, err := SumFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		sums[n] = sum
	}
	return sums, nil
}

// FormatSums writes sums as sha256sum does (`sha256sum -c` reads it back), sorted by name.
func FormatSums(sums map[string]string) []byte {
	var b bytes.Buffer
	for _, n := range slices.Sorted(maps.Keys(sums)) {
		fmt.Fprintf(&b, "%s  %s\n", sums[n], n)
	}
	return b.Bytes()
}

var sumLine = regexp.MustCompile(`^([0-9a-f]{64}) [ *](.+)$`)

// ParseSums reads a sha256sum file: "<hex>  <name>" (text mode) or "<hex> *<name>" (binary).
func ParseSums(data []byte) (map[string]string, error) {
	sums := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		m := sumLine.FindStringSubmatch(sc.Text())
		if m == nil {
			return nil, fmt.Errorf("line %d: %q is not \"<sha256>  <file>\"", n, sc.Text())
		}
		if strings.Contains(m[2], "/") {
			return nil, fmt.Errorf("line %d: %s is not a file beside the sums", n, m[2])
		}
		if _, dup := sums[m[2]]; dup {
			return nil, fmt.Errorf("line %d: %s listed twice", n, m[2])
		}
		sums[m[2]] = m[1]
	}
	return sums, sc.Err()
}
