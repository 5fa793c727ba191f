package mcp

import (
	"encoding/json"

	"github.com/switchboard-mcp/switchboard/internal/jsonrpc"
)

// CodeURLElicitationRequired is MCP 2025-11-25's URLElicitationRequiredError
// (-32042): the request cannot go on until the client's person has
// visited one or more URLs (URL-mode elicitations, in
// data.elicitations), after which the client retries it. 2026-07-28
// clients must never get it.
const CodeURLElicitationRequired = -32042

// URLElicitation is one URL-mode elicitation of a
// CodeURLElicitationRequired error's data.
type URLElicitation struct {
	Mode          string `json:"mode"` // always "url"
	URL           string `json:"url"`
	ElicitationID string `json:"elicitationId"`
	Message       string `json:"message"`
}

// URLElicitationRequired is the error asking the client to send its
// person to url; id names the elicitation (what a later
// notifications/elicitation/complete names). Only for a client of which
// ElicitsURL holds; the others get URLElicitationFallback of it.
func URLElicitationRequired(id, url, message string) *jsonrpc.Error {
	data := jsonrpc.Marshal(map[string]any{"elicitations": []URLElicitation{{Mode: "url", URL: url, ElicitationID: id, Message: message}}})
	return &jsonrpc.Error{Code: CodeURLElicitationRequired, Message: "URL elicitation required: " + message, Data: data}
}

// ElicitsURL reports whether a legacy client that negotiated version and
// declared caps (its initialize capabilities) takes a
// CodeURLElicitationRequired error: version 2025-11-25 and an
// elicitation.url capability.
func ElicitsURL(version string, caps json.RawMessage) bool {
	return version == LatestLegacyVersion && jsonrpc.Member(jsonrpc.Member(caps, "elicitation"), "url") != nil
}

// URLElicitationFallback is what a client that cannot take e (a
// CodeURLElicitationRequired error) gets instead: CodeOpenURL with the
// URLs in the message, for the person to open before retrying, and e's
// data. Any other error is returned as it is.
func URLElicitationFallback(e *jsonrpc.Error) *jsonrpc.Error {
	if e == nil || e.Code != CodeURLElicitationRequired {
		return e
	}
	var d struct {
		Elicitations []URLElicitation `json:"elicitations"`
	}
	_ = json.Unmarshal(e.Data, &d)
	msg := "the request needs a person to open a URL first"
	for i, el := range d.Elicitations {
		if i == 0 {
			msg = el.Message + ": open " + el.URL
		} else {
			msg += " and " + el.URL
		}
	}
	return &jsonrpc.Error{Code: CodeOpenURL, Message: msg + " in a browser, then retry", Data: e.Data}
}
