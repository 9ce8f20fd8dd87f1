package main

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// requestIDHeader carries a request's ID: the caller's (a gateway's), when
// it is one, else the service's own, and is sent back with the reply.
const requestIDHeader = "X-Request-Id"

// maxRequestIDLen bounds a caller's request ID.
const maxRequestIDLen = 64

// accessLog logs every request once it is answered, at INFO: method,
// route, path, status, bytes, duration, the client's address, the request
// ID and the trace ID (which also names the request's spans, sampled or
// not), so that a buyer's complaint, a gateway's log and a trace meet.
func accessLog(log *slog.Logger, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		id := r.Header.Get(requestIDHeader)
		if !validRequestID(id) {
			var b [8]byte
			rand.Read(b[:]) // documented never to return an error
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set(requestIDHeader, id)
		rec := &recorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		log.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("method", r.Method), slog.String("route", r.Pattern), slog.String("path", r.URL.Path),
			slog.Int("status", rec.status), slog.Int64("bytes", rec.bytes), slog.String("duration", time.Since(began).String()),
			slog.String("remote", r.RemoteAddr), slog.String("request_id", id),
			slog.String("trace_id", trace.SpanContextFromContext(r.Context()).TraceID().String()))
	})
}

// validRequestID reports whether a caller's request ID is one to log as
// it is: 1–maxRequestIDLen of A–Z a–z 0–9 . - _, nothing a log reader
// could mistake for another field.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for _, c := range []byte(id) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// recorder notes the status and the bytes of a reply. Unwrap gives
// http.ResponseController the connection's own writer (deadlines,
// flushes).
type recorder struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
	bytes       int64
}

func (r *recorder) WriteHeader(status int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = status, true
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wroteHeader = true
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
