package logging

import (
	"context"
	"sync"

	"github.com/hashicorp/go-hclog"
)

type ctxKey struct{}

type scoped struct {
	logger    hclog.Logger
	requestID string
}

// WithRequest returns ctx carrying base.With("request_id", id): handlers
// that log through FromContext name the request in every line.
func WithRequest(ctx context.Context, base hclog.Logger, id string) context.Context {
	return context.WithValue(ctx, ctxKey{}, scoped{logger: base.With("request_id", id), requestID: id})
}

// WithLazyRequest is WithRequest for a request whose ID costs something
// to find or make (metadata lookups, random bytes) and whose logger costs
// an allocation or two: id is called, and the logger built, only when the
// request first logs or asks for its ID, at most once. A call that logs
// nothing (the common, successful one at info level) pays for neither.
func WithLazyRequest(ctx context.Context, base hclog.Logger, id func() string) context.Context {
	return context.WithValue(ctx, ctxKey{}, &lazy{base: base, id: id})
}

// lazy is a scoped logger built on first use.
type lazy struct {
	once sync.Once
	base hclog.Logger
	id   func() string
	s    scoped
}

func (l *lazy) get() scoped {
	l.once.Do(func() {
		id := l.id()
		l.s = scoped{logger: l.base.With("request_id", id), requestID: id}
		l.id = nil
	})
	return l.s
}

// HasRequest reports whether ctx carries a request logger (made or not).
func HasRequest(ctx context.Context) bool {
	switch ctx.Value(ctxKey{}).(type) {
	case scoped, *lazy:
		return true
	}
	return false
}

// FromContext is the request's logger, or fallback outside a request.
func FromContext(ctx context.Context, fallback hclog.Logger) hclog.Logger {
	switch s := ctx.Value(ctxKey{}).(type) {
	case scoped:
		return s.logger
	case *lazy:
		return s.get().logger
	}
	return fallback
}

// RequestID is the ID WithRequest put in ctx ("" outside a request).
func RequestID(ctx context.Context) string {
	switch s := ctx.Value(ctxKey{}).(type) {
	case scoped:
		return s.requestID
	case *lazy:
		return s.get().requestID
	}
	return ""
}
