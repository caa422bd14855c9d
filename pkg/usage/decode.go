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

package usage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// The answers are decoded as they arrive, one series at a time into fixed fields, rather than
// read whole into the v1 API's model.Vector (a map of labels per series): a fleet's answer
// has one series per held GPU, and the body and the maps cost many times the figures kept.

// seriesLabels are the labels the queries keep.
type seriesLabels struct {
	Hostname string `json:"Hostname"`
	UUID     string `json:"UUID"`
	Profile  string `json:"GPU_I_PROFILE"`
	Instance string `json:"GPU_I_ID"`
	Model    string `json:"modelName"`
	Name     string `json:"namespace"`
	Pod      string `json:"pod"`
	Source   string `json:"usage_source"`
}

// sample is one series of an instant vector: its labels and [time, "value"].
type sample struct {
	Metric seriesLabels   `json:"metric"`
	Value  [2]json.Number `json:"value"`
}

// apiError is the body of a failed query.
type apiError struct {
	ErrorType promv1.ErrorType `json:"errorType"`
	Error     string           `json:"error"`
}

// decodeVector calls each with every series of an instant-vector answer, in order. A body
// that is not Prometheus' answer of a vector is an error.
func decodeVector(body io.Reader, each func(*seriesLabels, float64)) error {
	dec := json.NewDecoder(body)
	return decodeObject(dec, func(key string) (bool, error) {
		switch key {
		case "status":
			var status string
			if err := dec.Decode(&status); err != nil {
				return true, err
			}
			if status != "success" {
				return true, fmt.Errorf("status %q", status)
			}
		case "data":
			return true, decodeData(dec, each)
		default:
			return false, nil
		}
		return true, nil
	})
}

// decodeData reads {"resultType": "vector", "result": [...]}.
func decodeData(dec *json.Decoder, each func(*seriesLabels, float64)) error {
	return decodeObject(dec, func(key string) (bool, error) {
		switch key {
		case "resultType":
			var t string
			if err := dec.Decode(&t); err != nil {
				return true, err
			}
			if t != "vector" {
				return true, fmt.Errorf("a %s, not an instant vector", t)
			}
		case "result":
			return true, decodeResult(dec, each)
		default:
			return false, nil
		}
		return true, nil
	})
}

// decodeObject reads one JSON object, handing each key to field, which decodes its value
// and says so; the values of the keys it does not read are skipped.
func decodeObject(dec *json.Decoder, field func(key string) (read bool, err error)) error {
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := key.(string)
		read, err := field(name)
		if err != nil {
			return err
		}
		if !read {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return err
			}
		}
	}
	return expectDelim(dec, '}')
}

func decodeResult(dec *json.Decoder, each func(*seriesLabels, float64)) error {
	if err := expectDelim(dec, '['); err != nil {
		return err
	}
	var s sample
	for dec.More() {
		s = sample{}
		if err := dec.Decode(&s); err != nil {
			return err
		}
		v, err := strconv.ParseFloat(string(s.Value[1]), 64)
		if err != nil {
			return fmt.Errorf("value %q: %w", s.Value[1], err)
		}
		each(&s.Metric, v)
	}
	return expectDelim(dec, ']')
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("unexpected %v, want %v", tok, want)
	}
	return nil
}

// errorAnswer is what a failed query's body says, or the status code when it says nothing.
func errorAnswer(code int, body []byte) (promv1.ErrorType, string) {
	var e apiError
	if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
		return promv1.ErrServer, fmt.Sprintf("HTTP status %d: %s", code, cut(string(bytes.TrimSpace(body)), 256))
	}
	return e.ErrorType, fmt.Sprintf("%s: %s", e.ErrorType, e.Error)
}
