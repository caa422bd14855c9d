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

package inventorycache

import (
	"bytes"
	"fmt"
	"io"
)

// jsonFramer splits a JSON watch stream into its events by finding where each object ends
// (its closing bracket, outside strings) without checking the rest: client-go's JSON framer
// runs encoding/json over every byte twice (to find the end, then to copy it), and the event
// reader and the decoder check each frame anyway. Writing is the JSON framer's: objects as
// they are.
type jsonFramer struct{}

func (jsonFramer) NewFrameReader(r io.ReadCloser) io.ReadCloser { return &frameReader{r: r} }
func (jsonFramer) NewFrameWriter(w io.Writer) io.Writer         { return w }

// frameReader hands out one JSON object (or array) per Read, as client-go's JSON frame
// reader does: a frame longer than the caller's buffer comes in parts, each with
// io.ErrShortBuffer but the last.
type frameReader struct {
	r   io.ReadCloser
	buf []byte // buf[start:n] is read and not handed out yet
	// start is where the frame being scanned begins, pos how far it is scanned.
	start, pos, n int
	depth         int
	inString      bool
	remaining     []byte // the part of a frame the caller's buffer had no room for
}

// minRead is the least room a read from the stream is given.
const minRead = 32 << 10

func (f *frameReader) Read(data []byte) (int, error) {
	if len(f.remaining) > 0 {
		n := copy(data, f.remaining)
		if f.remaining = f.remaining[n:]; len(f.remaining) > 0 {
			return n, io.ErrShortBuffer
		}
		f.remaining = nil
		return n, nil
	}
	frame, err := f.next()
	if err != nil {
		return 0, err
	}
	n := copy(data, frame)
	if n < len(frame) {
		f.remaining = append([]byte(nil), frame[n:]...)
		return n, io.ErrShortBuffer
	}
	return n, nil
}

// next returns the next frame; it aliases f.buf until the next call.
func (f *frameReader) next() ([]byte, error) {
	for {
		end, err := f.scan()
		if err != nil {
			return nil, err
		}
		if end > 0 {
			frame := f.buf[f.start:end]
			f.start, f.pos = end, end
			return frame, nil
		}
		if f.start > 0 { // keep only the frame being read
			f.n = copy(f.buf, f.buf[f.start:f.n])
			f.pos -= f.start
			f.start = 0
		}
		if len(f.buf)-f.n < minRead {
			grown := make([]byte, max(2*len(f.buf), f.n+minRead))
			copy(grown, f.buf[:f.n])
			f.buf = grown
		}
		m, err := f.r.Read(f.buf[f.n:])
		f.n += m
		if err != nil && m == 0 {
			if err == io.EOF && (f.depth > 0 || f.inString) {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

// scan carries the scan of the frame at f.start on to f.n and returns the index past its
// end, or 0 when the frame is not complete yet.
func (f *frameReader) scan() (int, error) {
	for i := f.pos; i < f.n; i++ {
		if f.inString {
			q := bytes.IndexByte(f.buf[i:f.n], '"')
			if q < 0 {
				f.pos = f.n
				return 0, nil
			}
			i += q
			if !escaped(f.buf, f.start, i) {
				f.inString = false
			}
			continue
		}
		switch c := f.buf[i]; c {
		case ' ', '\t', '\r', '\n':
			if f.depth == 0 {
				f.start = i + 1 // between frames
			}
		case '"':
			if f.depth == 0 {
				return 0, fmt.Errorf("a watch stream holds a JSON string where an object should be")
			}
			f.inString = true
		case '{', '[':
			f.depth++
		case '}', ']':
			if f.depth == 0 {
				return 0, fmt.Errorf("a watch stream holds %q where an object should begin", c)
			}
			if f.depth--; f.depth == 0 {
				return i + 1, nil
			}
		default:
			if f.depth == 0 {
				return 0, fmt.Errorf("a watch stream holds %q where an object should begin", c)
			}
		}
	}
	f.pos = f.n
	return 0, nil
}

func (f *frameReader) Close() error { return f.r.Close() }
