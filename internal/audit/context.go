package audit

import "context"

// RecordKey is the context key under which a request's *Record is found:
// the edge's per-request context answers Value(RecordKey{}) with the
// record it logs when the request ends (carried in the same allocation as
// its other per-request state); handlers below it fill in what they learn.
type RecordKey struct{}

// FromContext returns the request's record, or a throwaway one so callers
// never need a nil check.
func FromContext(ctx context.Context) *Record {
	if r, ok := ctx.Value(RecordKey{}).(*Record); ok {
		return r
	}
	return &Record{}
}
