package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Limits on what a request may hold. A task's data reaches the rules as
// run.data and comes back in every read of the task, so anything the rules
// cannot take, or that would make a read many times larger than the write,
// is refused at the door with the field that broke it.
const (
	// MaxDataDepth is how deep data may nest (the data object itself is
	// level 1). It is the rules' own limit (rules/sandbox.go maxDepth):
	// deeper data could be stored but never planned.
	MaxDataDepth = 64
	// maxDataString bounds one string value in data.
	maxDataString = 16 << 10
	// maxDataKey bounds one object key in data.
	maxDataKey = 256
	// maxRuleName bounds the rule named by a task.
	maxRuleName = 200
	// maxPastDue is how far in the past a task may be due: a little late
	// is a client's clock or a retry; more is a mistake that would fire at
	// once, long after anyone expected it.
	maxPastDue = time.Hour
)

// canonicalData checks that data is a JSON object within the limits above
// and re-encodes it compactly with sorted keys, so that the same data sent
// with other spacing or key order is the same task. It streams through the
// tokens instead of decoding into maps: what it holds is about the size of
// the data, however it is shaped.
func canonicalData(raw json.RawMessage) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return nil, nil
	}
	if len(raw) > maxTaskData {
		return nil, &FieldError{"data", fmt.Sprintf("larger than %d KiB", maxTaskData>>10)}
	}
	if trimmed[0] != '{' {
		return nil, &FieldError{"data", "want a JSON object (rules read it as run.data)"}
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	var out bytes.Buffer
	out.Grow(len(trimmed))
	if err := canonValue(dec, &out, "data", 1); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &FieldError{"data", "want one JSON object, and nothing after it"}
	}
	return out.Bytes(), nil
}

// canonValue copies the next value of dec to out in canonical form. path
// names the value in errors (data.customer.tags[2]); depth is its level.
func canonValue(dec *json.Decoder, out *bytes.Buffer, path string, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return &FieldError{path, "not valid JSON: " + err.Error()}
	}
	switch v := tok.(type) {
	case json.Delim:
		if depth > MaxDataDepth {
			return &FieldError{path, fmt.Sprintf("nested deeper than %d levels (the rules' limit)", MaxDataDepth)}
		}
		if v == '[' {
			return canonArray(dec, out, path, depth)
		}
		return canonObject(dec, out, path, depth)
	case string:
		if len(v) > maxDataString {
			return &FieldError{path, fmt.Sprintf("a string longer than %d KiB", maxDataString>>10)}
		}
		writeString(out, v)
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return &FieldError{path, fmt.Sprintf("number %.40s is not a finite 64-bit float (rules could not read it)", v)}
		}
		out.WriteString(string(v))
	case bool:
		out.WriteString(strconv.FormatBool(v))
	case nil:
		out.WriteString("null")
	}
	return nil
}

func canonArray(dec *json.Decoder, out *bytes.Buffer, path string, depth int) error {
	out.WriteByte('[')
	for i := 0; dec.More(); i++ {
		if i > 0 {
			out.WriteByte(',')
		}
		if err := canonValue(dec, out, path+"["+strconv.Itoa(i)+"]", depth+1); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // ]
		return &FieldError{path, "not valid JSON: " + err.Error()}
	}
	out.WriteByte(']')
	return nil
}

// canonObject writes an object's members sorted by key. Each member is
// encoded on its own first; the parts add up to the object's size.
func canonObject(dec *json.Decoder, out *bytes.Buffer, path string, depth int) error {
	type member struct {
		key string
		val []byte
	}
	var members []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return &FieldError{path, "not valid JSON: " + err.Error()}
		}
		key, _ := tok.(string)
		if len(key) > maxDataKey {
			return &FieldError{path, fmt.Sprintf("a key longer than %d bytes (%.40q…)", maxDataKey, key)}
		}
		child := key
		if path != "" {
			child = path + "." + key
		}
		var b bytes.Buffer
		if err := canonValue(dec, &b, child, depth+1); err != nil {
			return err
		}
		members = append(members, member{key, b.Bytes()})
	}
	if _, err := dec.Token(); err != nil { // }
		return &FieldError{path, "not valid JSON: " + err.Error()}
	}
	slices.SortFunc(members, func(a, b member) int { return strings.Compare(a.key, b.key) })
	out.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			if m.key == members[i-1].key {
				return &FieldError{path + "." + m.key, "the key appears twice"}
			}
			out.WriteByte(',')
		}
		writeString(out, m.key)
		out.WriteByte(':')
		out.Write(m.val)
	}
	out.WriteByte('}')
	return nil
}

// writeString writes s as a JSON string, without HTML escaping (as the
// data was canonicalised before: stored tasks keep their bytes).
func writeString(out *bytes.Buffer, s string) {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	out.Truncate(out.Len() - 1)
}
