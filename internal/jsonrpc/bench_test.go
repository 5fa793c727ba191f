package jsonrpc

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// stdMessage is the envelope as encoding/json users write it: members kept
// raw, as Switchboard keeps them.
type stdMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// benchSmall is the smallest tools/call echo request (71 bytes: the
// "64 B" case).
var benchSmall = []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}`)

// benchLarge is a 64 KiB tools/call result: structured content and a text
// block with escapes, as a server returning a query result and a file sends.
var benchLarge = func() []byte {
	var rows []string
	for i := 0; len(strings.Join(rows, ",")) < 32<<10; i++ {
		rows = append(rows, fmt.Sprintf(`{"id":%d,"name":"row-%d","score":%g,"tags":["a","b"],"ok":%t}`, i, i, float64(i)*1.25e-3, i%2 == 0))
	}
	head := `{"jsonrpc":"2.0","id":7,"result":{"structuredContent":{"rows":[` + strings.Join(rows, ",") + `]},"content":[{"type":"text","text":"`
	tail := `"}],"isError":false}}`
	const unit = `line of tool output with \"quotes\" and \u00e9scapes\n`
	n := 64<<10 - len(head) - len(tail)
	text := strings.Repeat(unit, n/len(unit))
	text += strings.Repeat("x", n-len(text))
	return []byte(head + text + tail)
}()

func init() {
	if !json.Valid(benchSmall) || !json.Valid(benchLarge) || len(benchLarge) != 64<<10 {
		panic(fmt.Sprint("bad benchmark inputs: ", len(benchSmall), len(benchLarge)))
	}
}

func benchInputs() []struct {
	name string
	in   []byte
} {
	return []struct {
		name string
		in   []byte
	}{{"64B-request", benchSmall}, {"64KiB-result", benchLarge}}
}

// BenchmarkDecode measures a gateway's per-message cost: decode the
// envelope and encode it back, for Switchboard's scanner, encoding/json
// with raw members, and the go-sdk's jsonrpc package.
func BenchmarkDecode(b *testing.B) {
	for _, in := range benchInputs() {
		b.Run(in.name+"/switchboard", func(b *testing.B) {
			b.SetBytes(int64(len(in.in)))
			b.ReportAllocs()
			for b.Loop() {
				m, err := Decode(in.in)
				if err != nil {
					b.Fatal(err)
				}
				_ = m.Encode()
			}
		})
		b.Run(in.name+"/switchboard-decode-only", func(b *testing.B) {
			b.SetBytes(int64(len(in.in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(in.in); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(in.name+"/encoding-json", func(b *testing.B) {
			b.SetBytes(int64(len(in.in)))
			b.ReportAllocs()
			for b.Loop() {
				var m stdMessage
				if err := json.Unmarshal(in.in, &m); err != nil {
					b.Fatal(err)
				}
				if _, err := json.Marshal(&m); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(in.name+"/go-sdk", func(b *testing.B) {
			b.SetBytes(int64(len(in.in)))
			b.ReportAllocs()
			for b.Loop() {
				m, err := sdk.DecodeMessage(in.in)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := sdk.EncodeMessage(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRewriteID is the path every request and response takes through
// the gateway: decode, replace the id, encode.
func BenchmarkRewriteID(b *testing.B) {
	newID := IntID(123456)
	sdkID, _ := sdk.MakeID(float64(123456))
	for _, in := range benchInputs() {
		b.Run(in.name+"/switchboard", func(b *testing.B) {
			b.SetBytes(int64(len(in.in)))
			b.ReportAllocs()
			for b.Loop() {
				m, err := Decode(in.in)
				if err != nil {
					b.Fatal(err)
				}
				m.ID = newID
				_ = m.Encode()
			}
		})
		b.Run(in.name+"/encoding-json", func(b *testing.B) {
			b.SetBytes(int64(len(in.in)))
			b.ReportAllocs()
			for b.Loop() {
				var m stdMessage
				if err := json.Unmarshal(in.in, &m); err != nil {
					b.Fatal(err)
				}
				m.ID = newID
				if _, err := json.Marshal(&m); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(in.name+"/go-sdk", func(b *testing.B) {
			b.SetBytes(int64(len(in.in)))
			b.ReportAllocs()
			for b.Loop() {
				m, err := sdk.DecodeMessage(in.in)
				if err != nil {
					b.Fatal(err)
				}
				switch m := m.(type) {
				case *sdk.Request:
					m.ID = sdkID
				case *sdk.Response:
					m.ID = sdkID
				}
				if _, err := sdk.EncodeMessage(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkProgressToken is the tools/call rewrite of
// params._meta.progressToken.
func BenchmarkProgressToken(b *testing.B) {
	in := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},"_meta":{"progressToken":"tok-1"}}}`)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		m, err := Decode(in)
		if err != nil {
			b.Fatal(err)
		}
		if _, s, e, ok := Lookup(m.Params, "_meta", "progressToken"); ok {
			m.Params = Splice(m.Params, s, e, IntID(42))
		}
		m.ID = IntID(42)
		_ = m.Encode()
	}
}

// TestEncodeAllocs checks that Encode sizes its buffer once.
func TestEncodeAllocs(t *testing.T) {
	for _, m := range []*Message{
		{ID: IntID(1), Method: "tools/call", Params: raw(`{"name":"echo"}`)},
		{ID: raw(`"a-long-string-id-0123456789"`), Method: "notifications/resources/updated", Params: raw(`{}`)},
		{ID: IntID(1), Result: raw(`{}`)},
		{ID: raw(`null`), Error: raw(`{"code":1,"message":""}`)},
		{ID: IntID(1), Method: "m", Params: raw(`{}`), Result: raw(`{}`), Error: raw(`{}`)},
	} {
		if n := testing.AllocsPerRun(100, func() { _ = m.Encode() }); n != 1 {
			t.Errorf("Encode of %s: %v allocations, want 1", m, n)
		}
	}
}
