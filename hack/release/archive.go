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
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// ArchiveFile is one file of an archive.
type ArchiveFile struct {
	Name   string // name in the archive
	Source string // file to copy
	Mode   int64
}

// WriteArchive writes files into a gzip-compressed tar at path, reproducibly: entries sorted
// by name at the archive's root, owner 0:0 without names, mtime, the gzip header's time and
// OS fixed, so that the same files give the same bytes.
func WriteArchive(path string, files []ArchiveFile, mtime time.Time) (err error) {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b ArchiveFile) int { return strings.Compare(a.Name, b.Name) })
	for i := 1; i < len(files); i++ {
		if files[i].Name == files[i-1].Name {
			return fmt.Errorf("%s twice in the archive", files[i].Name)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	zw := gzip.NewWriter(f) // zero ModTime, OS unknown: no build-machine detail in the header
	tw := tar.NewWriter(zw)
	for _, file := range files {
		if err := addFile(tw, file, mtime); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

func addFile(tw *tar.Writer, file ArchiveFile, mtime time.Time) error {
	src, err := os.Open(file.Source)
	if err != nil {
		return err
	}
	defer src.Close()
	info, err := src.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", file.Source)
	}
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeReg,
		Name:     file.Name,
		Mode:     file.Mode,
		Size:     info.Size(),
		ModTime:  mtime.UTC().Truncate(time.Second),
		Format:   tar.FormatUSTAR,
	}); err != nil {
		return fmt.Errorf("%s: %w", file.Name, err)
	}
	if _, err := io.Copy(tw, src); err != nil {
		return fmt.Errorf("%s: %w", file.Name, err)
	}
	return nil
}

// ArchiveEntry is one entry read back from an archive.
type ArchiveEntry struct {
	Header tar.Header
	Data   []byte
}

// ReadArchive reads every entry of a gzip-compressed tar.
func ReadArchive(path string) ([]ArchiveEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var entries []ArchiveEntry
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return entries, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, h.Name, err)
		}
		entries = append(entries, ArchiveEntry{Header: *h, Data: data})
	}
}
