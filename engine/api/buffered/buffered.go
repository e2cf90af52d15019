// Package buffered buffers an HTTP answer so that it can be sent whole, later:
// the API's audit sends a write's answer, with its length, before it
// proposes the write's record; the cluster signs a peer's answer over its
// status and body before sending it. It imports only the standard library,
// so both may use it.
package buffered

import (
	"bytes"
	"net/http"
	"strconv"
	"time"
)

// Writer buffers what a handler writes (a small document: answers are
// buffered whole) until Send. Headers go straight to the wrapped writer.
type Writer struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

// WriteHeader keeps the first final status written. An informational one
// (1xx: a proxy passing on "100 Continue") is dropped: the buffered answer
// goes out later, whole, and it is not the answer's status.
func (w *Writer) WriteHeader(code int) {
	if code < http.StatusOK {
		return
	}
	if w.status == 0 {
		w.status = code
	}
}

// Write buffers b (a Write before any WriteHeader means 200, as net/http has it).
func (w *Writer) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(b)
}

// Status is the status the handler wrote (200 if it wrote none).
func (w *Writer) Status() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// Body is what the handler wrote.
func (w *Writer) Body() []byte { return w.body.Bytes() }

// Send writes the buffered answer to the wrapped writer, with its
// Content-Length, and flushes it: a client reading to the end has all of it
// now, not when the handler returns.
func (w *Writer) Send() {
	if w.body.Len() > 0 {
		w.Header().Set("Content-Length", strconv.Itoa(w.body.Len()))
	}
	w.ResponseWriter.WriteHeader(w.Status())
	_, _ = w.ResponseWriter.Write(w.body.Bytes())
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// SetReadDeadline reaches the connection (http.ResponseController), so a
// handler reading a large body (a backup restored) may take longer than
// the server's ReadTimeout. Writer has no Unwrap: a flush must not get
// past the buffered answer.
func (w *Writer) SetReadDeadline(t time.Time) error {
	return http.NewResponseController(w.ResponseWriter).SetReadDeadline(t)
}
