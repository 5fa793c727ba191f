package sigv4

import (
	"bytes"
	"cmp"
	"encoding/json"
	"encoding/xml"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"
)

// ErrorStatus wraps next so that an AWS error answer's type and message go
// into the status line of a 4xx response ("403 Forbidden
// (InvalidSignatureException: The request signature we calculated does not
// match …)", or "403 Forbidden (Access denied to this runtime)" for a body
// with a message and no type), which the upstream transports quote in the
// errors clients and the log see: AWS answers in JSON or XML bodies they do
// not show. The body is left as it was.
func ErrorStatus(next http.RoundTripper) http.RoundTripper { return errorStatus{next} }

type errorStatus struct{ next http.RoundTripper }

func (t errorStatus) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode < 400 || resp.StatusCode > 499 {
		return resp, err
	}
	if e := ErrorOf(resp); e != "" {
		resp.Status += " (" + e + ")"
	}
	return resp, nil
}

// ErrorOf returns "Type: message" of an AWS error answer, one line of at
// most 200 bytes, or "" when resp is none: the type from X-Amzn-Errortype or
// the body (JSON __type, code or Code; XML <Code>), the message from the
// body (JSON message or Message; XML <Message>); either alone when the
// other is missing. A JSON body is read whatever its Content-Type says
// (AgentCore's refusals are not always labelled). The head of the body it
// reads is put back.
func ErrorOf(resp *http.Response) string {
	typ := resp.Header.Get("X-Amzn-Errortype")
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var msg string
	if resp.Body != nil && resp.Body != http.NoBody {
		head, _ := peekBody(resp, 16<<10)
		var bodyType string
		trimmed := bytes.TrimSpace(head)
		switch {
		case strings.Contains(mt, "json") || len(trimmed) > 0 && trimmed[0] == '{':
			var e jsonError
			if json.Unmarshal(trimmed, &e) == nil {
				bodyType, msg = e.typ(), cmp.Or(e.Msg, e.MsgCap)
			}
		case strings.Contains(mt, "xml"):
			var e struct { // <ErrorResponse><Error>… (query protocol) or <Error>… (REST XML)
				Code     string `xml:"Error>Code"`
				Message  string `xml:"Error>Message"`
				Code2    string `xml:"Code"`
				Message2 string `xml:"Message"`
			}
			if xml.Unmarshal(head, &e) == nil {
				bodyType, msg = cmp.Or(e.Code, e.Code2), cmp.Or(e.Message, e.Message2)
			}
		}
		typ = cmp.Or(typ, bodyType)
	}
	if typ = typeName(typ); typ != "" && msg != "" {
		return oneLine(typ + ": " + msg)
	}
	return oneLine(typ + msg) // either, or neither: ""
}

// jsonError is an AWS error answer in JSON: its type is __type, code or
// Code, its message message or Message.
type jsonError struct {
	Type    string `json:"__type"`
	Code    string `json:"code"`
	CodeCap string `json:"Code"`
	Msg     string `json:"message"`
	MsgCap  string `json:"Message"`
}

func (e jsonError) typ() string { return cmp.Or(e.Type, e.Code, e.CodeCap) }

// typeName is the name of an AWS error type: ExpiredTokenException of
// "ExpiredTokenException:http://…" and of
// "com.amazon.coral.service#ExpiredTokenException".
func typeName(t string) string {
	t, _, _ = strings.Cut(t, ":")
	if i := strings.LastIndexByte(t, '#'); i >= 0 {
		t = t[i+1:]
	}
	return strings.TrimSpace(t)
}

// peekBody reads up to n bytes of resp's body and puts them back in front
// of the rest.
func peekBody(resp *http.Response, n int64) ([]byte, error) {
	head, err := io.ReadAll(io.LimitReader(resp.Body, n))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	return head, err
}

// oneLine is the first line of s without control characters, cut to 200
// bytes, never inside a word (as audit.WordCut: the text is redacted only
// after the cut, and a secret cut in two would show its prefix).
func oneLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) <= 200 {
		return s
	}
	cut := 200
	for cut > 0 && isWordByte(s[cut-1]) && isWordByte(s[cut]) {
		cut--
	}
	return strings.TrimRight(s[:cut], " ") + "…"
}

func isWordByte(c byte) bool {
	if c >= utf8.RuneSelf {
		return true
	}
	return c > ' ' && strings.IndexByte("\"'`,;()[]{}<>", c) < 0
}
