package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/dop251/goja"
)

// API is the script API, as execute's description gives it to a model.
const API = `Script API (JavaScript; no file system, network or modules):
- call_tool(server, tool, args) calls a tool and returns its result: the structuredContent when the tool gives one, else its text (several text items joined by newlines), else the whole CallToolResult. A failed tool (isError) throws ToolError; a server or tool this namespace does not offer throws PermissionError. call_tool(name, args) takes a tool's exposed name (as tools/list and search show it).
- api.server(name).TOOL(args), or api.NAME.TOOL(args), is call_tool(name, "TOOL", args) (use api.server("my-server")["my-tool"](args) for names that are not identifiers); api.call_tool is call_tool; api.call_tool_raw(server, tool, args) returns the whole CallToolResult without throwing on isError.
- parallel([{server, tool, args}, ...]) (or [server, tool, args] triples) runs the calls concurrently and returns their results in order; it throws the first error after all have ended.
- print(...) and console.log/info/warn/error(...) write a line to stdout (objects as JSON).
- The result is the value of the last expression statement; a script using top-level return or await runs as an async function body and its returned value is the result.
Tools are named in scripts by their server's own name, or by their new name when the namespace renames them; inspect shows both.`

// install sets up the script's globals.
func (x *run) install() error {
	vm := x.vm
	g := vm.GlobalObject()
	jsonObj := vm.Get("JSON").ToObject(vm)
	var ok bool
	if x.stringify, ok = goja.AssertFunction(jsonObj.Get("stringify")); !ok {
		return errors.New("no JSON.stringify")
	}
	if x.parse, ok = goja.AssertFunction(jsonObj.Get("parse")); !ok {
		return errors.New("no JSON.parse")
	}
	if err := x.guardNatives(); err != nil {
		return err
	}

	print := func(call goja.FunctionCall) goja.Value {
		parts := make([]string, len(call.Arguments))
		for i, a := range call.Arguments {
			parts[i] = x.show(a)
		}
		x.write(strings.Join(parts, " ") + "\n")
		return goja.Undefined()
	}
	if err := g.Set("print", print); err != nil {
		return err
	}
	console := vm.NewObject()
	for _, n := range []string{"log", "info", "warn", "error", "debug"} {
		_ = console.Set(n, print)
	}
	_ = g.Set("console", console)

	callTool := func(call goja.FunctionCall) goja.Value {
		server, tool, args := x.callArgs(call.Arguments)
		return x.toValue(x.call(server, tool, args, false))
	}
	_ = g.Set("call_tool", callTool)
	_ = g.Set("api", vm.NewDynamicObject(&apiObject{x: x, fns: map[string]goja.Value{
		"call_tool": vm.ToValue(callTool),
		"call_tool_raw": vm.ToValue(func(call goja.FunctionCall) goja.Value {
			server, tool, args := x.callArgs(call.Arguments)
			return x.toValue(x.call(server, tool, args, true))
		}),
		"server": vm.ToValue(func(name string) *goja.Object {
			return vm.NewDynamicObject(&serverProxy{x: x, server: name})
		}),
		"parallel": vm.ToValue(x.parallel),
	}}))
	_ = g.Set("parallel", x.parallel)
	for _, n := range []string{"ToolError", "PermissionError"} {
		if _, err := vm.RunString(fmt.Sprintf(
			"class %[1]s extends Error { constructor(m) { super(m); this.name = %[1]q; } }", n)); err != nil {
			return err
		}
	}
	return nil
}

// valueBytes is what one array element is taken to cost.
const valueBytes = 16

// iterating are the Array.prototype methods that walk or build every index
// up to length in one native call (which no interrupt reaches).
var iterating = []string{"fill", "join", "toString", "toLocaleString", "map", "forEach", "filter", "reduce",
	"reduceRight", "some", "every", "find", "findIndex", "findLast", "findLastIndex", "indexOf", "lastIndexOf",
	"includes", "copyWithin", "reverse", "sort", "slice", "splice", "concat", "flat", "flatMap", "toReversed",
	"toSorted", "toSpliced", "with", "keys", "values", "entries", "push", "unshift"}

// guardNatives refuses, up front, native calls that would allocate or
// walk more than the memory bound in one go (no interrupt reaches inside
// them): String.prototype.repeat, padStart, padEnd and split, Array.from,
// and the Array.prototype methods that walk every index of an array
// longer than memory/16 elements (a sparse array's length costs nothing
// until such a method fills it).
func (x *run) guardNatives() error {
	vm := x.vm
	maxElems := float64(x.limits.Memory) / valueBytes
	wrap := func(obj *goja.Object, name string, check func(call goja.FunctionCall) (float64, string)) error {
		orig, ok := goja.AssertFunction(obj.Get(name))
		if !ok {
			return nil // not provided by this goja
		}
		guarded := func(call goja.FunctionCall) goja.Value {
			if n, what := check(call); n > maxElems {
				x.exceed(&LimitError{Limit: "memory", Msg: fmt.Sprintf("memory: the script used more than %s (%s)", SizeText(x.limits.Memory), what)})
			}
			v, err := orig(call.This, call.Arguments...)
			if err != nil {
				panic(err)
			}
			return v
		}
		return obj.DefineDataProperty(name, vm.ToValue(guarded), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	}
	str := vm.Get("String").ToObject(vm).Get("prototype").ToObject(vm)
	thisLen := func(call goja.FunctionCall) float64 {
		if o, ok := call.This.(*goja.Object); ok {
			return float64(o.Get("length").ToInteger())
		}
		return float64(len(call.This.String()))
	}
	for _, name := range []string{"repeat", "padStart", "padEnd", "split"} {
		err := wrap(str, name, func(call goja.FunctionCall) (float64, string) {
			var n float64
			switch name {
			case "repeat":
				n = call.Argument(0).ToFloat() * float64(len(call.This.String()))
			case "split":
				n = float64(len(call.This.String())) * 2
			default:
				n = call.Argument(0).ToFloat()
			}
			// A character may take 2 bytes; compared with elements of 16.
			return n / 8, fmt.Sprintf("String.prototype.%s would build %.0f characters or parts", name, n)
		})
		if err != nil {
			return err
		}
	}
	arrayCtor := vm.Get("Array").ToObject(vm)
	arr := arrayCtor.Get("prototype").ToObject(vm)
	for _, name := range iterating {
		err := wrap(arr, name, func(call goja.FunctionCall) (float64, string) {
			n := thisLen(call)
			return n, fmt.Sprintf("Array.prototype.%s over %.0f elements", name, n)
		})
		if err != nil {
			return err
		}
	}
	return wrap(arrayCtor, "from", func(call goja.FunctionCall) (float64, string) {
		n := 0.0
		if o, ok := call.Argument(0).(*goja.Object); ok {
			n = float64(o.Get("length").ToInteger())
		}
		return n, fmt.Sprintf("Array.from of %.0f elements", n)
	})
}

// SizeText is n bytes as text: "4 MiB", "64 KiB", or "1000 bytes" when n
// is no whole number of either.
func SizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// write appends printed output, stopping the script past MaxOutput.
func (x *run) write(s string) {
	x.mu.Lock()
	room := int(x.limits.MaxOutput) - x.stdout.Len()
	over := len(s) > room
	if over {
		s = s[:max(room, 0)]
	}
	x.stdout.WriteString(s)
	x.mu.Unlock()
	if over {
		x.exceed(&LimitError{Limit: "max_output", Msg: fmt.Sprintf("max_output: the script printed more than %s", SizeText(x.limits.MaxOutput))})
	}
}

// show formats a printed value: strings as they are, the rest as JSON
// (String() when JSON has no form for it).
func (x *run) show(v goja.Value) string {
	if v == nil || goja.IsUndefined(v) {
		return "undefined"
	}
	if s, ok := v.Export().(string); ok {
		return s
	}
	if _, isObj := v.(*goja.Object); isObj {
		if _, isFn := goja.AssertFunction(v); !isFn {
			if s, err := x.stringify(goja.Undefined(), v); err == nil && !goja.IsUndefined(s) {
				return s.String()
			}
		}
	}
	return v.String()
}

// callArgs reads (server, tool, args) or (exposed name, args).
func (x *run) callArgs(a []goja.Value) (server, tool string, args json.RawMessage) {
	str := func(i int) string {
		if i >= len(a) || goja.IsUndefined(a[i]) || goja.IsNull(a[i]) {
			return ""
		}
		if s, ok := a[i].Export().(string); ok {
			return s
		}
		panic(x.vm.NewTypeError("call_tool: argument %d must be a string", i+1))
	}
	if len(a) >= 2 {
		if _, isStr := a[1].Export().(string); !isStr {
			return "", str(0), x.argsJSON(a[1])
		}
	}
	server, tool = str(0), str(1)
	if tool == "" {
		if server == "" {
			panic(x.vm.NewTypeError("call_tool: name the tool: call_tool(server, tool, args) or call_tool(name, args)"))
		}
		return "", server, x.argsJSON(nil)
	}
	var av goja.Value
	if len(a) > 2 {
		av = a[2]
	}
	return server, tool, x.argsJSON(av)
}

// argsJSON encodes a tool's arguments (undefined and null are {}).
func (x *run) argsJSON(v goja.Value) json.RawMessage {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return json.RawMessage("{}")
	}
	if _, isObj := v.(*goja.Object); !isObj {
		panic(x.vm.NewTypeError("call_tool: arguments must be an object"))
	}
	s, err := x.stringify(goja.Undefined(), v)
	if err != nil {
		panic(err)
	}
	return json.RawMessage(s.String())
}

// outcome is one call's result: the value for the script, or why not.
type outcome struct {
	val json.RawMessage // JSON of the value
	str *string         // a text result (returned as a string, not parsed)
	err error
}

// count takes one tool call off the budget, stopping the script when it
// is spent.
func (x *run) count(n int) {
	x.mu.Lock()
	x.calls += n
	over := x.calls > x.limits.MaxCalls
	x.mu.Unlock()
	if over {
		x.exceed(&LimitError{Limit: "max_calls", Msg: fmt.Sprintf("max_calls: the script made more than %d tool calls", x.limits.MaxCalls)})
	}
}

// call makes one tool call (on the script's goroutine).
func (x *run) call(server, tool string, args json.RawMessage, raw bool) outcome {
	x.count(1)
	return x.do(server, tool, args, raw)
}

// do calls the tool and shapes its result; safe on any goroutine.
func (x *run) do(server, tool string, args json.RawMessage, raw bool) outcome {
	res, err := x.caller.CallTool(x.ctx, server, tool, args)
	if err != nil {
		return outcome{err: err}
	}
	if raw {
		return outcome{val: res}
	}
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Structured json.RawMessage `json:"structuredContent"`
		IsError    bool            `json:"isError"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return outcome{err: &ToolError{Msg: fmt.Sprintf("malformed tool result: %v", err)}}
	}
	texts := make([]string, 0, len(r.Content))
	allText := true
	for _, c := range r.Content {
		if c.Type != "text" {
			allText = false
			break
		}
		texts = append(texts, c.Text)
	}
	text := strings.Join(texts, "\n")
	name := tool
	if server != "" {
		name = server + "." + tool
	}
	if r.IsError {
		return outcome{err: &ToolError{Msg: fmt.Sprintf("%s failed: %s", name, text)}}
	}
	if len(r.Structured) > 0 && string(r.Structured) != "null" {
		return outcome{val: r.Structured}
	}
	if allText {
		return outcome{str: &text}
	}
	return outcome{val: res}
}

// toValue turns an outcome into the script's value, or throws.
func (x *run) toValue(o outcome) goja.Value {
	if o.err != nil {
		x.throw(o.err)
	}
	if o.str != nil {
		return x.vm.ToValue(*o.str)
	}
	v, err := x.parse(goja.Undefined(), x.vm.ToValue(string(o.val)))
	if err != nil {
		panic(err)
	}
	return v
}

// throw raises a call's error in the script: PermissionError, ToolError,
// or (a bound hit, the context ended) an error the interrupt follows.
func (x *run) throw(err error) {
	name := "ToolError"
	var pe *PermissionError
	if errors.As(err, &pe) {
		name = "PermissionError"
	}
	if x.ctx.Err() != nil {
		x.ctxEnded() // the first bound stays: AfterFunc may not have run yet
		panic(x.vm.NewGoError(x.limitHit()))
	}
	ctor, ok := goja.AssertConstructor(x.vm.Get(name))
	if !ok {
		panic(x.vm.NewGoError(err))
	}
	obj, cerr := ctor(nil, x.vm.ToValue(err.Error()))
	if cerr != nil {
		panic(x.vm.NewGoError(err))
	}
	panic(obj)
}

// parallel runs calls concurrently: parallel([{server, tool, args}, ...]).
func (x *run) parallel(call goja.FunctionCall) goja.Value {
	vm := x.vm
	list, ok := call.Argument(0).(*goja.Object)
	if !ok {
		panic(vm.NewTypeError("parallel: expected an array of calls"))
	}
	n := max(0, int(list.Get("length").ToInteger()))
	x.count(n) // stops the script when over the budget
	type job struct {
		server, tool string
		args         json.RawMessage
	}
	jobs := make([]job, n)
	for i := range n {
		item := list.Get(fmt.Sprint(i))
		obj, ok := item.(*goja.Object)
		if !ok {
			panic(vm.NewTypeError("parallel: item %d is not a call ({server, tool, args} or [server, tool, args])", i))
		}
		var argv []goja.Value
		if obj.ClassName() == "Array" {
			for j := range int(obj.Get("length").ToInteger()) {
				argv = append(argv, obj.Get(fmt.Sprint(j)))
			}
		} else {
			get := func(k string) goja.Value {
				if v := obj.Get(k); v != nil {
					return v
				}
				return goja.Undefined()
			}
			if s := get("server"); !goja.IsUndefined(s) {
				argv = []goja.Value{s, get("tool"), get("args")}
			} else {
				argv = []goja.Value{get("name"), get("args")}
			}
		}
		s, t, a := x.callArgs(argv)
		jobs[i] = job{s, t, a}
	}
	out := make([]outcome, n)
	sem := make(chan struct{}, maxParallel)
	var wg sync.WaitGroup
	for i, j := range jobs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i] = x.do(j.server, j.tool, j.args, false)
		})
	}
	wg.Wait()
	vals := make([]any, n)
	for i, o := range out {
		vals[i] = x.toValue(o) // throws the first error
	}
	return vm.NewArray(vals...)
}

// apiObject is the global api: its functions, and any other property is
// the server of that name (api.memory is api.server("memory")).
type apiObject struct {
	fixed
	x   *run
	fns map[string]goja.Value
}

func (a *apiObject) Get(key string) goja.Value {
	if f, ok := a.fns[key]; ok {
		return f
	}
	if notServer(key) {
		return goja.Undefined()
	}
	return a.x.vm.NewDynamicObject(&serverProxy{x: a.x, server: key})
}
func (a *apiObject) Keys() []string {
	return []string{"call_tool", "call_tool_raw", "server", "parallel"}
}

// serverProxy is api.server(name): each property is a function calling
// the tool of that name.
type serverProxy struct {
	fixed
	x      *run
	server string
}

func (p *serverProxy) Get(key string) goja.Value {
	if notServer(key) {
		return goja.Undefined()
	}
	return p.x.vm.ToValue(func(call goja.FunctionCall) goja.Value {
		return p.x.toValue(p.x.call(p.server, key, p.x.argsJSON(call.Argument(0)), false))
	})
}
func (p *serverProxy) Keys() []string { return nil }

// notServer: the names api and its servers answer undefined for, not as a
// server or tool: keeps await and JSON.stringify sane.
func notServer(key string) bool { return key == "then" || key == "toJSON" || key == "constructor" }

// fixed is the part of goja.DynamicObject a proxy shares: every name is
// there, and none can be set or deleted.
type fixed struct{}

func (fixed) Set(string, goja.Value) bool { return false }
func (fixed) Has(string) bool             { return true }
func (fixed) Delete(string) bool          { return false }
