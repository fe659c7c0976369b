package logging

import (
	"context"

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

// FromContext is the request's logger, or fallback outside a request.
func FromContext(ctx context.Context, fallback hclog.Logger) hclog.Logger {
	if s, ok := ctx.Value(ctxKey{}).(scoped); ok {
		return s.logger
	}
	return fallback
}

// RequestID is the ID WithRequest put in ctx ("" outside a request).
func RequestID(ctx context.Context) string {
	s, _ := ctx.Value(ctxKey{}).(scoped)
	return s.requestID
}
