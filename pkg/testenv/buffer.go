package testenv

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer collects output that one goroutine writes while another reads it.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Lines returns what was written so far, line by line.
func (b *Buffer) Lines() []string {
	return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
}
