package session

import (
	"context"
	"encoding/json"
	"strconv"
	"sync/atomic"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// pageSeq numbers the requests ListPages sends.
var pageSeq atomic.Int64

// ListPages sends method (a paged list: tools/list, …) through send, page by
// page up to 100 pages, with the request ids idPrefix-N and meta as the
// params' _meta (nil: none), and gives each page's result to page (its
// index first). It stops at the last page, at the first error of send,
// Drain or page, or at an error response (returned as its *jsonrpc.Error).
func ListPages(ctx context.Context, send func(context.Context, *jsonrpc.Message) (Call, error), method, idPrefix string,
	meta json.RawMessage, page func(i int, result json.RawMessage) error) error {
	cursor := ""
	for i := range 100 {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		if meta != nil {
			params["_meta"] = meta
		}
		id := strconv.Quote(idPrefix + strconv.FormatInt(pageSeq.Add(1), 10))
		c, err := send(ctx, jsonrpc.NewRequest(json.RawMessage(id), method, jsonrpc.Marshal(params)))
		if err != nil {
			return err
		}
		res, err := Drain(ctx, c, nil)
		if err != nil {
			return err
		}
		if e := res.ErrorOf(); e != nil {
			return e
		}
		if err := page(i, res.Result); err != nil {
			return err
		}
		next, _ := jsonrpc.StringMember(res.Result, "nextCursor")
		if next == "" {
			return nil
		}
		cursor = next
	}
	return nil
}
