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

package prototest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Decoder is one decoder of a DecodeBench comparison (a cache's hand decoder, or the
// generated one followed by the cache's trim).
type Decoder[T any] struct {
	Name string
	// Make returns a fresh decoder, with tables (shared strings, sets) of its own.
	Make func() func([]byte) (T, error)
}

// Inputs is one named set of encoded objects.
type Inputs struct {
	Name string
	Data [][]byte
}

// DecodeBench runs, for each set and decoder, a benchmark that decodes one object per op,
// cycling through the set, and reports held-B/obj, the heap the decoded set holds per object
// once the garbage is collected, and wire-B/obj, the objects' mean size. warm leaves the
// decoder's shared tables out of held-B/obj (the set is decoded once before); else they
// count, as in a cache that holds one decoder.
func DecodeBench[T any](b *testing.B, sets []Inputs, decoders []Decoder[T], warm bool) {
	for _, set := range sets {
		for _, d := range decoders {
			b.Run(set.Name+"/"+d.Name, func(b *testing.B) {
				held := HeldPerInput(b, set.Data, d.Make(), warm)
				decode := d.Make()
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					if _, err := decode(set.Data[i%len(set.Data)]); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(held, "held-B/obj") // after the loop, which clears metrics
				b.ReportMetric(meanBytes(set.Data), "wire-B/obj")
			})
		}
	}
}

// HeldPerInput decodes every input, keeps the results and returns the heap they hold per
// input once the garbage is collected (warm: the inputs are decoded once before, so that
// the decoder's shared tables are not counted).
func HeldPerInput[T any](tb testing.TB, data [][]byte, decode func([]byte) (T, error), warm bool) float64 {
	if warm {
		for _, d := range data {
			if _, err := decode(d); err != nil {
				tb.Fatal(err)
			}
		}
	}
	kept := make([]T, len(data))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i, d := range data {
		v, err := decode(d)
		if err != nil {
			tb.Fatal(err)
		}
		kept[i] = v
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	runtime.KeepAlive(decode) // and its shared tables
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(len(data))
}

// meanBytes is the inputs' mean size.
func meanBytes(data [][]byte) float64 {
	total := 0
	for _, d := range data {
		total += len(d)
	}
	return float64(total) / float64(len(data))
}

// YAMLDocuments reads the YAML documents of the files matching pattern (a test's testdata),
// each with the file it came from; the test fails when no file matches.
func YAMLDocuments(tb testing.TB, pattern string) []Document {
	tb.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		tb.Fatalf("%s: %v (%d files)", pattern, err, len(files))
	}
	var docs []Document
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := reader.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				tb.Fatalf("%s: %v", f, err)
			}
			docs = append(docs, Document{File: f, YAML: doc})
		}
	}
	return docs
}

// Document is one YAML document of a file.
type Document struct {
	File string
	YAML []byte
}
