package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// maxFireBody bounds the body of POST /v1/rules/{name}/fire.
const maxFireBody = 4 << 10

// bodyError refuses a request body as a whole, with its own status (413,
// 415).
type bodyError struct {
	code   int
	reason string
}

func (e *bodyError) Error() string { return e.reason }

// decodeBody reads r's body into v: one JSON object, no field that v lacks,
// nothing after it, at most limit bytes (MaxBytesReader: a huge body is
// refused, not read). want shows the expected object in reasons. An empty
// body leaves v as it is when optional.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any, optional bool, want string) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		// No type is taken as JSON (Go's clients send none by default); a
		// form or text body is refused rather than parsed as JSON.
		if mt, _, err := mime.ParseMediaType(ct); err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return &bodyError{http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %q: want application/json", ct)}
		}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// A second value would otherwise be ignored: {"slot": …}{"slot": …}.
		var extra json.RawMessage
		switch err = dec.Decode(&extra); {
		case errors.Is(err, io.EOF):
			return nil
		case err == nil:
			return &FieldError{"body", "want one JSON object " + want + ", and nothing after it"}
		}
	}
	var (
		mbe *http.MaxBytesError
		ute *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &mbe):
		return &bodyError{http.StatusRequestEntityTooLarge, fmt.Sprintf("body: larger than %d KiB", limit>>10)}
	case errors.Is(err, io.EOF) && optional:
		return nil
	case errors.Is(err, io.EOF):
		return &FieldError{"body", "empty; want a JSON object " + want}
	case errors.As(err, &ute) && ute.Field != "":
		return &FieldError{ute.Field, "want a " + ute.Type.String()}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &FieldError{f, "unknown field; want " + want}
	}
	return &FieldError{"body", "want a JSON object " + want + ": " + err.Error()}
}
