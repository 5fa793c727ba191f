package audit

import "context"

type recordKey struct{}

// WithRecord returns a context carrying r, the record of the HTTP request
// being served. The gateway creates the record and logs it when the request
// ends (the one call site); handlers below it fill in what they learn.
func WithRecord(ctx context.Context, r *Record) context.Context {
	return context.WithValue(ctx, recordKey{}, r)
}

// FromContext returns the request's record, or a throwaway one so callers
// never need a nil check.
func FromContext(ctx context.Context) *Record {
	if r, ok := ctx.Value(recordKey{}).(*Record); ok {
		return r
	}
	return &Record{}
}
