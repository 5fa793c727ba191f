package audit

import "context"

// RecordKey is the context key under which a request's *Record is found.
// [WithRecord] is the plain way to attach one; a caller that builds its own
// context type per request (to carry the record in the same allocation as
// other per-request state) answers Value(RecordKey{}) with the *Record.
type RecordKey struct{}

// WithRecord returns a context carrying r, the record of the HTTP request
// being served. The gateway creates the record and logs it when the request
// ends (the one call site); handlers below it fill in what they learn.
func WithRecord(ctx context.Context, r *Record) context.Context {
	return context.WithValue(ctx, RecordKey{}, r)
}

// FromContext returns the request's record, or a throwaway one so callers
// never need a nil check.
func FromContext(ctx context.Context) *Record {
	if r, ok := ctx.Value(RecordKey{}).(*Record); ok {
		return r
	}
	return &Record{}
}
