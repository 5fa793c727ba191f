package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// kind names the shape a decoded message must have.
type kind int

const (
	kRequest kind = iota + 1
	kNotification
	kResponse
)

func kindOf(m *Message) kind {
	switch {
	case m.IsRequest():
		return kRequest
	case m.IsNotification():
		return kNotification
	case m.IsResponse():
		return kResponse
	}
	return 0
}

// raw makes a json.RawMessage literal in tables; "" means nil.
func raw(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

func nest(open, close string, n int, inner string) string {
	return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
}

func TestDecodeValid(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		kind   kind
		id     string
		method string
		params string
		result string
		err    string
	}{
		// Requests.
		{name: "request int id", in: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, kind: kRequest, id: `1`, method: "tools/list"},
		{name: "request string id", in: `{"jsonrpc":"2.0","id":"a-1","method":"ping","params":{}}`, kind: kRequest, id: `"a-1"`, method: "ping", params: `{}`},
		{name: "request empty string id", in: `{"jsonrpc":"2.0","id":"","method":"ping"}`, kind: kRequest, id: `""`, method: "ping"},
		{name: "request array params", in: `{"jsonrpc":"2.0","id":2,"method":"sum","params":[1,2,3]}`, kind: kRequest, id: `2`, method: "sum", params: `[1,2,3]`},
		{name: "request members any order", in: `{"params":{"a":1},"method":"x","id":3,"jsonrpc":"2.0"}`, kind: kRequest, id: `3`, method: "x", params: `{"a":1}`},
		{name: "request negative id", in: `{"jsonrpc":"2.0","id":-12,"method":"x"}`, kind: kRequest, id: `-12`, method: "x"},
		{name: "request zero id", in: `{"jsonrpc":"2.0","id":0,"method":"x"}`, kind: kRequest, id: `0`, method: "x"},
		// -0 is an integer token per the JSON grammar; it is kept verbatim
		// (its bytes are not those of 0).
		{name: "request id -0", in: `{"jsonrpc":"2.0","id":-0,"method":"x"}`, kind: kRequest, id: `-0`, method: "x"},
		// validID puts no bound on the digits; ParseIntID then fails.
		{name: "request id beyond int64", in: `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"x"}`, kind: kRequest, id: `123456789012345678901234567890`, method: "x"},
		{name: "request id string with escapes", in: `{"jsonrpc":"2.0","id":"a\"b\u0000","method":"x"}`, kind: kRequest, id: `"a\"b\u0000"`, method: "x"},

		// Notifications.
		{name: "notification", in: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, kind: kNotification, method: "notifications/initialized"},
		{name: "notification params", in: `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":0.5}}`, kind: kNotification, method: "notifications/progress", params: `{"progressToken":"t","progress":0.5}`},

		// Responses.
		{name: "result", in: `{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`, kind: kResponse, id: `1`, result: `{"tools":[]}`},
		{name: "result string id", in: `{"jsonrpc":"2.0","id":"x","result":{}}`, kind: kResponse, id: `"x"`, result: `{}`},
		{name: "result scalar", in: `{"jsonrpc":"2.0","id":1,"result":42}`, kind: kResponse, id: `1`, result: `42`},
		// A null result is a result.
		{name: "result null", in: `{"jsonrpc":"2.0","id":1,"result":null}`, kind: kResponse, id: `1`, result: `null`},
		{name: "error", in: `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no such method"}}`, kind: kResponse, id: `1`, err: `{"code":-32601,"message":"no such method"}`},
		{name: "error null id", in: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`, kind: kResponse, id: `null`, err: `{"code":-32700,"message":"parse error"}`},
		// Leniency: a null id is also taken on a success response (the
		// spec reserves it for errors; ParseIntID rejects it, so it is
		// dropped as unknown by the upstream dispatcher).
		{name: "result null id (lenient)", in: `{"jsonrpc":"2.0","id":null,"result":{}}`, kind: kResponse, id: `null`, result: `{}`},
		// Leniency: the error member is not checked to be an object.
		{name: "error not an object (lenient)", in: `{"jsonrpc":"2.0","id":1,"error":"boom"}`, kind: kResponse, id: `1`, err: `"boom"`},

		// Whitespace everywhere JSON allows it, and only there.
		{name: "whitespace", in: " \t\r\n{ \"jsonrpc\" :\t\"2.0\" ,\n\"id\" : 1 , \"method\" : \"ping\" , \"params\" : { \"a\" : [ 1 , 2 ] } \r\n}\n\n", kind: kRequest, id: `1`, method: "ping", params: `{ "a" : [ 1 , 2 ] }`},

		// Escapes and unicode in method names.
		{name: "method escaped slash", in: `{"jsonrpc":"2.0","id":1,"method":"tools\/call"}`, kind: kRequest, id: `1`, method: "tools/call"},
		{name: "method unicode escape", in: `{"jsonrpc":"2.0","id":1,"method":"a\u0062c"}`, kind: kRequest, id: `1`, method: "abc"},
		{name: "method quote escape", in: `{"jsonrpc":"2.0","id":1,"method":"say \"hi\"\n"}`, kind: kRequest, id: `1`, method: "say \"hi\"\n"},
		{name: "method utf8", in: `{"jsonrpc":"2.0","id":1,"method":"outils/appelé/日本"}`, kind: kRequest, id: `1`, method: "outils/appelé/日本"},
		{name: "method surrogate pair", in: `{"jsonrpc":"2.0","id":1,"method":"\ud83d\ude00"}`, kind: kRequest, id: `1`, method: "😀"},
		// Lone surrogates and invalid UTF-8 become U+FFFD, as with encoding/json.
		{name: "method lone surrogate", in: `{"jsonrpc":"2.0","id":1,"method":"\ud800"}`, kind: kRequest, id: `1`, method: "\uFFFD"},
		{name: "method invalid utf8", in: "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\xffb\"}", kind: kRequest, id: `1`, method: "a\uFFFDb"},
		{name: "params unicode", in: `{"jsonrpc":"2.0","id":1,"method":"m","params":{"ключ":"值 \u00e9 😀"}}`, kind: kRequest, id: `1`, method: "m", params: `{"ключ":"值 \u00e9 😀"}`},

		// Keys are compared after unescaping, as encoding/json does.
		{name: "escaped member names", in: `{"js\u006fnrpc":"2.0","\u0069d":5,"meth\u006fd":"ping","par\u0061ms":{}}`, kind: kRequest, id: `5`, method: "ping", params: `{}`},

		// Nested params.
		{name: "nested params", in: `{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":{"b":[{"c":[[],{}]},null,true,false,"s",-1.5e+3]}}}`, kind: kRequest, id: `1`, method: "m", params: `{"a":{"b":[{"c":[[],{}]},null,true,false,"s",-1.5e+3]}}`},
		{name: "nesting at maxDepth", in: `{"jsonrpc":"2.0","id":1,"method":"m","params":` + nest("[", "]", maxDepth, "") + `}`, kind: kRequest, id: `1`, method: "m", params: nest("[", "]", maxDepth, "")},
		{name: "object nesting at maxDepth", in: `{"jsonrpc":"2.0","id":1,"method":"m","params":` + nest(`{"a":`, "}", maxDepth, "1") + `}`, kind: kRequest, id: `1`, method: "m", params: nest(`{"a":`, "}", maxDepth, "1")},

		// Numbers inside params.
		{name: "numbers", in: `{"jsonrpc":"2.0","id":1,"method":"m","params":[-0,0,1e5,1E+5,1.5,-1.25e-10,0.0,123456789012345678901234567890]}`, kind: kRequest, id: `1`, method: "m", params: `[-0,0,1e5,1E+5,1.5,-1.25e-10,0.0,123456789012345678901234567890]`},

		// Unknown members are ignored (and dropped by Encode).
		{name: "unknown members", in: `{"jsonrpc":"2.0","id":1,"method":"m","x-extra":{"deep":[1]},"Method":"other"}`, kind: kRequest, id: `1`, method: "m"},

		// Duplicate members: the last one wins, like encoding/json,
		// JavaScript's JSON.parse and Python's json.
		{name: "duplicate method last wins", in: `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call"}`, kind: kRequest, id: `1`, method: "tools/call"},
		{name: "duplicate id last wins", in: `{"jsonrpc":"2.0","id":1,"id":"two","method":"m"}`, kind: kRequest, id: `"two"`, method: "m"},
		{name: "duplicate params last wins", in: `{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1},"params":[2]}`, kind: kRequest, id: `1`, method: "m", params: `[2]`},
		{name: "duplicate escaped method last wins", in: `{"jsonrpc":"2.0","id":1,"method":"tools/list","m\u0065thod":"tools/call"}`, kind: kRequest, id: `1`, method: "tools/call"},
		{name: "duplicate jsonrpc last wins", in: `{"jsonrpc":"1.0","jsonrpc":"2.0","method":"m"}`, kind: kNotification, method: "m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode([]byte(tt.in))
			if err != nil {
				t.Fatalf("Decode(%q): %v", tt.in, err)
			}
			if got := kindOf(m); got != tt.kind {
				t.Errorf("kind = %d, want %d", got, tt.kind)
			}
			check := func(field string, got json.RawMessage, want string) {
				t.Helper()
				if !bytes.Equal(got, raw(want)) || (got == nil) != (want == "") {
					t.Errorf("%s = %q, want %q", field, got, want)
				}
			}
			check("ID", m.ID, tt.id)
			check("Params", m.Params, tt.params)
			check("Result", m.Result, tt.result)
			check("Error", m.Error, tt.err)
			if m.Method != tt.method {
				t.Errorf("Method = %q, want %q", m.Method, tt.method)
			}
			// Whatever was decoded re-encodes to valid JSON that decodes to
			// the same message.
			enc := m.Encode()
			if !json.Valid(enc) {
				t.Fatalf("Encode gave invalid JSON: %s", enc)
			}
			m2, err := Decode(enc)
			if err != nil {
				t.Fatalf("Decode(Encode()) = %v for %s", err, enc)
			}
			if !reflect.DeepEqual(m, m2) {
				t.Errorf("re-decoded %#v, want %#v", m2, m)
			}
		})
	}
}

func TestDecodeInvalid(t *testing.T) {
	const batch = 1 // sentinel code: want ErrBatch
	tests := []struct {
		name string
		in   string
		code int
	}{
		// Not JSON, or not an object.
		{"empty", ``, ParseError},
		{"whitespace only", " \n\t", ParseError},
		{"garbage", `hello`, ParseError},
		{"number then garbage", `1x`, ParseError},
		{"unterminated top-level string", `"x`, ParseError},
		{"bom", "\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"method\":\"m\"}", ParseError},
		{"unterminated object", `{`, ParseError},
		{"unterminated after member", `{"jsonrpc":"2.0",`, ParseError},
		{"unterminated after value", `{"jsonrpc":"2.0"`, ParseError},
		{"trailing comma", `{"jsonrpc":"2.0","method":"m",}`, ParseError},
		{"leading comma", `{,"jsonrpc":"2.0","method":"m"}`, ParseError},
		{"single quotes", `{'jsonrpc':'2.0'}`, ParseError},
		{"unquoted key", `{jsonrpc:"2.0"}`, ParseError},
		{"missing colon", `{"jsonrpc" "2.0"}`, ParseError},
		{"missing comma", `{"jsonrpc":"2.0" "method":"m"}`, ParseError},
		{"missing value", `{"jsonrpc":}`, ParseError},
		{"bad escape", `{"jsonrpc":"2.0","method":"a\x"}`, ParseError},
		{"short unicode escape", `{"jsonrpc":"2.0","method":"\u12"}`, ParseError},
		{"bad unicode escape", `{"jsonrpc":"2.0","method":"\u12g4"}`, ParseError},
		{"raw control char", "{\"jsonrpc\":\"2.0\",\"method\":\"a\nb\"}", ParseError},
		{"raw tab in string", "{\"jsonrpc\":\"2.0\",\"method\":\"a\tb\"}", ParseError},
		{"unterminated string", `{"jsonrpc":"2.0","method":"abc}`, ParseError},
		{"escaped final quote", `{"jsonrpc":"2.0","method":"abc\"}`, ParseError},
		{"leading zero", `{"jsonrpc":"2.0","id":01,"method":"m"}`, ParseError},
		{"bare minus", `{"jsonrpc":"2.0","id":-,"method":"m"}`, ParseError},
		{"plus sign", `{"jsonrpc":"2.0","id":+1,"method":"m"}`, ParseError},
		{"dot without digits", `{"jsonrpc":"2.0","id":1.,"method":"m"}`, ParseError},
		{"leading dot", `{"jsonrpc":"2.0","id":.5,"method":"m"}`, ParseError},
		{"exponent without digits", `{"jsonrpc":"2.0","id":1e,"method":"m"}`, ParseError},
		{"hex", `{"jsonrpc":"2.0","id":0x10,"method":"m"}`, ParseError},
		{"NaN", `{"jsonrpc":"2.0","id":NaN,"method":"m"}`, ParseError},
		{"truncated literal", `{"jsonrpc":"2.0","id":1,"method":"m","params":[tru]}`, ParseError},
		{"capital literal", `{"jsonrpc":"2.0","id":1,"method":"m","params":[True]}`, ParseError},
		{"array trailing comma", `{"jsonrpc":"2.0","id":1,"method":"m","params":[1,]}`, ParseError},
		{"array missing comma", `{"jsonrpc":"2.0","id":1,"method":"m","params":[1 2]}`, ParseError},
		{"unclosed array", `{"jsonrpc":"2.0","id":1,"method":"m","params":[1}`, ParseError},
		{"mismatched brackets", `{"jsonrpc":"2.0","id":1,"method":"m","params":{]}`, ParseError},
		{"comment", `{"jsonrpc":"2.0",/*x*/"method":"m"}`, ParseError},
		{"vertical tab whitespace", "{\v\"jsonrpc\":\"2.0\",\"method\":\"m\"}", ParseError},
		{"nbsp whitespace", "{\u00a0\"jsonrpc\":\"2.0\",\"method\":\"m\"}", ParseError},

		// Trailing data.
		{"trailing brace", `{"jsonrpc":"2.0","method":"m"}}`, ParseError},
		{"two messages", `{"jsonrpc":"2.0","method":"m"}{"jsonrpc":"2.0","method":"m"}`, ParseError},
		{"two lines", "{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n{\"jsonrpc\":\"2.0\",\"method\":\"m\"}", ParseError},
		{"trailing word", `{"jsonrpc":"2.0","method":"m"} x`, ParseError},
		{"trailing NUL", "{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\x00", ParseError},

		// A syntax error anywhere is a parse error even when an earlier
		// member is already known to be wrong.
		{"bad method then syntax error", `{"jsonrpc":"2.0","method":1,`, ParseError},
		{"bad method then trailing data", `{"jsonrpc":"2.0","method":null} x`, ParseError},

		// Nesting beyond maxDepth is refused without recursing further.
		{"arrays beyond maxDepth", `{"jsonrpc":"2.0","id":1,"method":"m","params":` + nest("[", "]", maxDepth+2, "") + `}`, ParseError},
		{"objects beyond maxDepth", `{"jsonrpc":"2.0","id":1,"method":"m","params":` + nest(`{"a":`, "}", maxDepth+2, "1") + `}`, ParseError},
		{"million arrays", `{"jsonrpc":"2.0","id":1,"method":"m","params":` + nest("[", "]", 1<<20, "") + `}`, ParseError},
		{"million unclosed", `{"jsonrpc":"2.0","id":1,"method":"m","params":` + strings.Repeat(`[{"a":`, 1<<19), ParseError},
		{"deep id", `{"jsonrpc":"2.0","id":` + nest("[", "]", 1<<16, "") + `,"method":"m"}`, ParseError},

		// Batches.
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"m"}]`, batch},
		{"empty batch", ` [ ]`, batch},
		// Leniency: any input starting with '[' is reported as a batch,
		// even when it is not valid JSON.
		{"broken batch", `[`, batch},

		// Valid JSON, invalid JSON-RPC.
		// JSON that is not an object is an invalid request, not a parse
		// error (JSON-RPC 2.0 section 5.1).
		{"null", `null`, InvalidRequest},
		{"string", ` "x" `, InvalidRequest},
		{"number", `1`, InvalidRequest},
		{"true", `true`, InvalidRequest},
		{"empty object", `{}`, InvalidRequest},
		{"no jsonrpc", `{"id":1,"method":"m"}`, InvalidRequest},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":1,"method":"m"}`, InvalidRequest},
		{"jsonrpc number", `{"jsonrpc":2.0,"id":1,"method":"m"}`, InvalidRequest},
		{"jsonrpc null", `{"jsonrpc":null,"id":1,"method":"m"}`, InvalidRequest},
		{"jsonrpc padded", `{"jsonrpc":"2.0 ","id":1,"method":"m"}`, InvalidRequest},
		// The version is compared byte for byte: an escaped "2.0" is refused.
		{"jsonrpc escaped", `{"jsonrpc":"2\u002e0","id":1,"method":"m"}`, InvalidRequest},
		{"jsonrpc key wrong case", `{"JSONRPC":"2.0","id":1,"method":"m"}`, InvalidRequest},
		{"method number", `{"jsonrpc":"2.0","id":1,"method":1}`, InvalidRequest},
		{"method null", `{"jsonrpc":"2.0","id":1,"method":null}`, InvalidRequest},
		{"method object", `{"jsonrpc":"2.0","id":1,"method":{}}`, InvalidRequest},
		{"method empty", `{"jsonrpc":"2.0","id":1,"method":""}`, InvalidRequest},
		{"method key wrong case", `{"jsonrpc":"2.0","id":1,"Method":"m"}`, InvalidRequest},
		{"request with result", `{"jsonrpc":"2.0","id":1,"method":"m","result":{}}`, InvalidRequest},
		{"request with error", `{"jsonrpc":"2.0","id":1,"method":"m","error":{"code":1,"message":""}}`, InvalidRequest},
		{"id float", `{"jsonrpc":"2.0","id":1.5,"method":"m"}`, InvalidRequest},
		{"id exponent", `{"jsonrpc":"2.0","id":1e5,"method":"m"}`, InvalidRequest},
		{"id integral float", `{"jsonrpc":"2.0","id":1.0,"method":"m"}`, InvalidRequest},
		{"id true", `{"jsonrpc":"2.0","id":true,"method":"m"}`, InvalidRequest},
		{"id object", `{"jsonrpc":"2.0","id":{},"method":"m"}`, InvalidRequest},
		{"id array", `{"jsonrpc":"2.0","id":[1],"method":"m"}`, InvalidRequest},
		// A request with "id": null is refused: MCP requires a string or
		// integer id, and treating it as a notification would swallow the
		// response the sender waits for.
		{"request id null", `{"jsonrpc":"2.0","id":null,"method":"m"}`, InvalidRequest},
		{"params string", `{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}`, InvalidRequest},
		{"params number", `{"jsonrpc":"2.0","id":1,"method":"m","params":1}`, InvalidRequest},
		{"params null", `{"jsonrpc":"2.0","id":1,"method":"m","params":null}`, InvalidRequest},
		{"params true", `{"jsonrpc":"2.0","method":"m","params":true}`, InvalidRequest},
		{"response without id", `{"jsonrpc":"2.0","result":{}}`, InvalidRequest},
		{"response id float", `{"jsonrpc":"2.0","id":1.5,"result":{}}`, InvalidRequest},
		{"response id object", `{"jsonrpc":"2.0","id":{},"error":{"code":1,"message":""}}`, InvalidRequest},
		{"result and error", `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":""}}`, InvalidRequest},
		{"result and null error", `{"jsonrpc":"2.0","id":1,"result":{},"error":null}`, InvalidRequest},
		{"nothing", `{"jsonrpc":"2.0","id":1}`, InvalidRequest},
		{"only params", `{"jsonrpc":"2.0","id":1,"params":{}}`, InvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode([]byte(tt.in))
			if err == nil {
				t.Fatalf("Decode(%.80q) = %v, want an error", tt.in, m)
			}
			if m != nil {
				t.Errorf("Decode returned a message with its error")
			}
			if tt.code == batch {
				if !errors.Is(err, ErrBatch) {
					t.Fatalf("err = %v, want ErrBatch", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %T %v, want *Error", err, err)
			}
			if e.Code != tt.code {
				t.Errorf("code = %d (%s), want %d", e.Code, e.Message, tt.code)
			}
			// Every *Error must itself be sendable.
			if !json.Valid(NewError(nil, e).Encode()) {
				t.Errorf("error response is not valid JSON")
			}
		})
	}
}

// equalJSON reports whether a and b hold the same JSON value per encoding/json.
func equalJSON(t testing.TB, a, b []byte) bool {
	t.Helper()
	va, err := unmarshalAny(a)
	if err != nil {
		t.Fatalf("unmarshal %.200s: %v", a, err)
	}
	vb, err := unmarshalAny(b)
	if err != nil {
		t.Fatalf("unmarshal %.200s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

// mcpCorpus is a set of realistic MCP messages, in the shapes clients and
// servers send them (some pretty-printed, members in varied order).
func mcpCorpus() map[string]string {
	big := strings.Repeat("The quick brown fox jumps over the lazy dog. \u00e9\u65e5 \\n \"q\" ", 1024)
	var rows []string
	for i := 0; len(strings.Join(rows, ",")) < 64<<10; i++ {
		rows = append(rows, fmt.Sprintf(`{"id":%d,"name":"row-%d","score":%g,"tags":["a","b"],"ok":%t,"none":null}`, i, i, float64(i)*1.25e-3, i%2 == 0))
	}
	return map[string]string{
		"initialize": `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"roots":{"listChanged":true},"sampling":{},"elicitation":{}},"clientInfo":{"name":"claude-ai","version":"0.1.0"}}}`,
		"initialize result": `{
  "jsonrpc": "2.0",
  "id": 0,
  "result": {
    "protocolVersion": "2025-06-18",
    "capabilities": {"logging": {}, "prompts": {"listChanged": true}, "resources": {"subscribe": true, "listChanged": true}, "tools": {"listChanged": true}},
    "serverInfo": {"name": "example-server", "title": "Example Server", "version": "1.0.0"},
    "instructions": "Optional instructions for the client"
  }
}`,
		"initialized":            `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		"tools/list":             `{"jsonrpc":"2.0","id":"list-1","method":"tools/list","params":{"cursor":"optional-cursor-value"}}`,
		"tools/call":             `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_weather","arguments":{"location":"New York","units":"metric","days":3,"detail":null},"_meta":{"progressToken":"abc-123"}}}`,
		"tools/call int":         `{"method":"tools/call","params":{"_meta":{"progressToken":17},"name":"echo","arguments":{"text":"h\u00e9llo \ud83d\ude00"}},"id":9007199254740993,"jsonrpc":"2.0"}`,
		"tools/call result":      `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"Current weather in New York:\nTemperature: 72\u00b0F\nConditions: Partly cloudy"},{"type":"image","data":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==","mimeType":"image/png"}],"structuredContent":{"temperature":22.5,"conditions":"Partly cloudy","humidity":65},"isError":false}}`,
		"progress":               `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"abc-123","progress":50,"total":100,"message":"Reticulating splines..."}}`,
		"progress float":         `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":17,"progress":0.333333333333333314829616256247,"total":1e0}}`,
		"cancelled":              `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"123","reason":"User requested cancellation"}}`,
		"sampling/createMessage": `{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"What is the capital of France?"}}],"modelPreferences":{"hints":[{"name":"claude-3-sonnet"}],"intelligencePriority":0.8,"speedPriority":0.5},"systemPrompt":"You are a helpful assistant.","maxTokens":100}}`,
		"sampling result":        `{"jsonrpc":"2.0","id":1,"result":{"role":"assistant","content":{"type":"text","text":"The capital of France is Paris."},"model":"claude-3-sonnet-20240307","stopReason":"endTurn"}}`,
		"elicitation":            `{"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{"message":"Please provide your GitHub username","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}}`,
		"logging":                `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error","logger":"database","data":{"error":"Connection failed","details":{"host":"localhost","port":5432}}}}`,
		"error":                  `{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"Unknown tool: invalid_tool_name","data":{"tool":"invalid_tool_name"}}}`,
		"error null id":          `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`,
		"resources/read":         `{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"file:///project/src/main.rs"}}`,
		"ping":                   `{"jsonrpc":"2.0","id":"ping-\u00e9","method":"ping"}`,
		"64KiB text result": `{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":` +
			string(mustMarshal(big)) + `}],"isError":false}}`,
		"64KiB structured result": `{"jsonrpc":"2.0","id":43,"result":{"content":[],"structuredContent":{"rows":[` +
			strings.Join(rows, ",") + `]}}}`,
	}
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestRoundTripMCP(t *testing.T) {
	for name, in := range mcpCorpus() {
		t.Run(name, func(t *testing.T) {
			if !json.Valid([]byte(in)) {
				t.Fatalf("corpus entry is not valid JSON")
			}
			m, err := Decode([]byte(in))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			out := m.Encode()
			if !equalJSON(t, []byte(in), out) {
				t.Errorf("round trip changed the message:\n in: %.300s\nout: %.300s", in, out)
			}
			// AppendTo appends and leaves the prefix alone.
			app := m.AppendTo([]byte("prefix"))
			if !bytes.Equal(app, append([]byte("prefix"), out...)) {
				t.Errorf("AppendTo = %.100s", app)
			}
			if m.String() != string(out) {
				t.Errorf("String differs from Encode")
			}
		})
	}
}

// TestRoundTripAliases documents that Decode does not copy: members alias
// the input buffer.
func TestRoundTripAliases(t *testing.T) {
	in := []byte(`{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1}}`)
	m, err := Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	copy(in[bytes.Index(in, []byte(`"a"`)):], `"b"`)
	if string(m.Params) != `{"b":1}` {
		t.Errorf("Params = %s, want it to alias the input", m.Params)
	}
}

func TestRewriteID(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":"client-7","method":"tools/call","params":{"name":"echo"}}`
	m, err := Decode([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	m.ID = IntID(1234)
	out := m.Encode()
	want := `{"jsonrpc":"2.0","id":1234,"method":"tools/call","params":{"name":"echo"}}`
	if string(out) != want {
		t.Errorf("Encode = %s, want %s", out, want)
	}
	if n, ok := ParseIntID(m.ID); !ok || n != 1234 {
		t.Errorf("ParseIntID = %d, %v", n, ok)
	}
}

func TestConstructors(t *testing.T) {
	tests := []struct {
		m    *Message
		want string
		kind kind
	}{
		{NewRequest(IntID(1), "tools/list", nil), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, kRequest},
		{NewRequest(Quote("x"), "a\"b", raw(`{}`)), `{"jsonrpc":"2.0","id":"x","method":"a\"b","params":{}}`, kRequest},
		{NewNotification("notifications/initialized", nil), `{"jsonrpc":"2.0","method":"notifications/initialized"}`, kNotification},
		{NewResult(IntID(2), nil), `{"jsonrpc":"2.0","id":2,"result":{}}`, kResponse},
		{NewResult(IntID(2), raw(`[1]`)), `{"jsonrpc":"2.0","id":2,"result":[1]}`, kResponse},
		{NewError(nil, Errorf(ParseError, "bad %d", 1)), `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad 1"}}`, kResponse},
		{NewError(IntID(3), &Error{Code: InvalidParams, Message: "x", Data: raw(`{"k":1}`)}), `{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"x","data":{"k":1}}}`, kResponse},
	}
	for _, tt := range tests {
		got := tt.m.Encode()
		if string(got) != tt.want {
			t.Errorf("Encode = %s, want %s", got, tt.want)
		}
		m, err := Decode(got)
		if err != nil {
			t.Errorf("Decode(%s): %v", got, err)
			continue
		}
		if kindOf(m) != tt.kind {
			t.Errorf("%s: kind %d, want %d", got, kindOf(m), tt.kind)
		}
	}
}

func TestErrorOf(t *testing.T) {
	m, _ := Decode([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope","data":[1]}}`))
	e := m.ErrorOf()
	if e == nil || e.Code != MethodNotFound || e.Message != "nope" || string(e.Data) != "[1]" {
		t.Errorf("ErrorOf = %+v", e)
	}
	if e.Error() != "jsonrpc error -32601: nope" {
		t.Errorf("Error() = %q", e.Error())
	}
	m, _ = Decode([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	if m.ErrorOf() != nil {
		t.Errorf("ErrorOf of a result is not nil")
	}
	m, _ = Decode([]byte(`{"jsonrpc":"2.0","id":1,"error":"boom"}`))
	if e := m.ErrorOf(); e == nil || e.Code != InternalError {
		t.Errorf("ErrorOf of a malformed error = %+v", e)
	}
}

func TestIntIDs(t *testing.T) {
	for _, tt := range []struct {
		in string
		n  int64
		ok bool
	}{
		{"0", 0, true},
		{"-0", 0, true},
		{"42", 42, true},
		{"-42", -42, true},
		{"9223372036854775807", 1<<63 - 1, true},
		{"9223372036854775808", 0, false},
		{"123456789012345678901234567890", 0, false},
		{`"42"`, 0, false},
		{"1.0", 0, false},
		{"1e3", 0, false},
		{"null", 0, false},
		{"", 0, false},
	} {
		n, ok := ParseIntID(raw(tt.in))
		if ok != tt.ok || (ok && n != tt.n) {
			t.Errorf("ParseIntID(%q) = %d, %v; want %d, %v", tt.in, n, ok, tt.n, tt.ok)
		}
	}
}

func TestMarshalPanics(t *testing.T) {
	if got := string(Marshal(map[string]int{"a": 1})); got != `{"a":1}` {
		t.Errorf("Marshal = %s", got)
	}
	defer func() {
		if recover() == nil {
			t.Errorf("Marshal of a channel did not panic")
		}
	}()
	Marshal(make(chan int))
}
