package router

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"maps"
	"strconv"
	"strings"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// DefaultPageSize is the number of items of one page of a merged list.
const DefaultPageSize = 200

// listVersion identifies the content of a merged list: cursors minted for
// one version are refused by another, so a client never pages across a
// change and silently skips or repeats items.
func listVersion(keys []string) string {
	h := sha256.New()
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// encodeCursor returns the opaque cursor of the page starting at offset.
func encodeCursor(kind, version string, offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + "." + version + "." + strconv.Itoa(offset)))
}

// decodeCursor returns the offset a cursor names, or an InvalidParams error
// when it is not one of ours, belongs to another list or another version,
// or points past the end.
func decodeCursor(cursor, kind, version string, n int) (int, *jsonrpc.Error) {
	bad := func(why string) (int, *jsonrpc.Error) {
		return 0, jsonrpc.Errorf(jsonrpc.InvalidParams, "invalid cursor: %s", why)
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return bad("not a cursor issued by this server")
	}
	parts := strings.Split(string(raw), ".")
	if len(parts) != 3 || parts[0] != kind {
		return bad("not a cursor of this list")
	}
	if parts[1] != version {
		return bad("the list changed since the cursor was issued; list again from the start")
	}
	off, err := strconv.Atoi(parts[2])
	if err != nil || off <= 0 || off >= n {
		return bad("offset out of range")
	}
	return off, nil
}

// page answers a list request from a merged list: the page that the
// request's cursor names (the first without one), and nextCursor when more
// follow. key is the result member that holds the items ("tools", ...);
// extra members (resultType etc.) are added as given.
func page(params json.RawMessage, kind, key string, items []json.RawMessage, version string, size int, extra map[string]any) (json.RawMessage, *jsonrpc.Error) {
	if size <= 0 {
		size = DefaultPageSize
	}
	off := 0
	if c, ok := jsonrpc.StringMember(params, "cursor"); ok && c != "" {
		o, e := decodeCursor(c, kind, version, len(items))
		if e != nil {
			return nil, e
		}
		off = o
	} else if v := jsonrpc.Member(params, "cursor"); v != nil && string(v) != "null" && !ok {
		return nil, jsonrpc.Errorf(jsonrpc.InvalidParams, "invalid cursor: must be a string")
	}
	end := min(off+size, len(items))
	res := map[string]any{}
	maps.Copy(res, extra)
	pageItems := items[off:end]
	if pageItems == nil {
		pageItems = []json.RawMessage{}
	}
	res[key] = pageItems
	if end < len(items) {
		res["nextCursor"] = encodeCursor(kind, version, end)
	}
	return jsonrpc.Marshal(res), nil
}
