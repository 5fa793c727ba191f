package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"sync"

	"github.com/dlclark/regexp2/v2"
)

// The worker protocol: one JSON object per line, each way, over the
// worker's stdin and stdout.
//
//	gateway → worker  {"t":"run","script":…,"limits":{…}}    a script
//	worker → gateway  {"t":"call","id":N,"server":…,"tool":…,"args":{…}}
//	gateway → worker  {"t":"reply","id":N,"result":{…}} or {"t":"reply","id":N,"err":{"kind":"permission"|"tool","msg":…}}
//	worker → gateway  {"t":"done","res":{…Result},"again":true}  then the next run, or (again false) it exits
//
// The gateway reads at most Runner.maxFrame bytes a line; a worker whose
// stdin ends (the gateway gone) exits.
type frame struct {
	T      string          `json:"t"`
	ID     int64           `json:"id,omitempty"`
	Script string          `json:"script,omitempty"`
	Limits *Limits         `json:"limits,omitempty"`
	Server string          `json:"server,omitempty"`
	Tool   string          `json:"tool,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Err    *frameErr       `json:"err,omitempty"`
	Res    *Result         `json:"res,omitempty"`
	Again  bool            `json:"again,omitempty"` // done: the worker takes another script
}

type frameErr struct {
	Kind string `json:"kind"`
	Msg  string `json:"msg"`
}

// frameTooLong is a line past the reader's bound.
type frameTooLong struct{ max int }

func (e *frameTooLong) Error() string { return fmt.Sprintf("a frame longer than %d bytes", e.max) }

// readFrame reads one line of at most maxLen bytes (0: unbounded) as a frame.
func readFrame(r *bufio.Reader, maxLen int) (*frame, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if maxLen > 0 && len(line)+len(chunk) > maxLen {
			return nil, &frameTooLong{max: maxLen}
		}
		line = append(line, chunk...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if err == io.EOF && len(line) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	f := &frame{}
	if err := json.Unmarshal(line, f); err != nil {
		return nil, fmt.Errorf("a malformed frame: %w", err)
	}
	return f, nil
}

// Environment variables of a worker process.
const (
	workerEnvName = "SWITCHBOARD_SANDBOX_WORKER"
	niceEnvName   = "SWITCHBOARD_SANDBOX_NICE"
)

// WorkerMain must be called first thing in main by a binary whose Runners
// run scripts (cmd/switchboard), and in TestMain by the tests of a package
// that runs them: in a worker process (started by a Runner, marked by its
// environment) it runs the worker and exits; anywhere else it returns at
// once.
func WorkerMain() {
	if os.Getenv(workerEnvName) != "1" {
		return
	}
	nice, _ := strconv.Atoi(os.Getenv(niceEnvName))
	os.Exit(serveWorker(os.Stdin, os.Stdout, nice))
}

// serveWorker is a worker's life: it lowers its priority, and then for
// each script it is given bounds itself (address space and CPU time),
// runs it and answers its result. After a script that hit a bound (or,
// past maxScripts, after any) it exits instead of waiting for the next:
// the gateway then drops it.
func serveWorker(in io.Reader, out io.Writer, nice int) int {
	lowerPriority(nice)
	// A native call recursing without bound (a deeply nested value) ends
	// the worker long before Go's 1 GB default.
	debug.SetMaxStack(256 << 20)
	cpuLimitExits()
	wr := &frameWriter{w: out}
	pc := &pipeCaller{out: wr, waiting: map[int64]chan *frame{}}
	runs := make(chan *frame)
	go pc.read(bufio.NewReaderSize(in, 64<<10), runs) // ends with the process
	for n := 1; ; n++ {
		f := <-runs
		if f.Limits == nil {
			return 1
		}
		l := *f.Limits
		if err := limitSelf(l); err != nil {
			fmt.Fprintf(os.Stderr, "sandbox worker: %v\n", err)
			return 1
		}
		// A regular expression cannot be interrupted: its match gives up
		// at the script's deadline instead (the interrupt then stops the
		// script).
		regexp2.DefaultMatchTimeout = l.Timeout
		res := runLocal(context.Background(), l, f.Script, pc, func(res *Result) {
			_ = wr.send(&frame{T: "done", Res: res})
			os.Exit(0)
		})
		again := res.Limit == "" && n < maxScripts
		if err := wr.send(&frame{T: "done", Res: res, Again: again}); err != nil || !again {
			return 0
		}
	}
}

// cpuLimitText is what a worker says on stderr at its CPU time limit.
const cpuLimitText = "sandbox worker: CPU time limit"

// maxScripts bounds the scripts one worker runs.
const maxScripts = 100

// frameWriter writes frames, one at a time.
type frameWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (fw *frameWriter) send(f *frame) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	_, err = fw.w.Write(append(b, '\n'))
	return err
}

// pipeCaller is a worker's Caller: each call goes to the gateway as a
// frame and waits for its reply.
type pipeCaller struct {
	out *frameWriter

	mu      sync.Mutex // guards next, waiting
	next    int64
	waiting map[int64]chan *frame
}

// read hands each reply to its call and each script to runs; the
// gateway gone ends the worker.
func (pc *pipeCaller) read(rd *bufio.Reader, runs chan<- *frame) {
	for {
		f, err := readFrame(rd, 0)
		if err != nil {
			os.Exit(0) // the gateway left: nothing can take a result
		}
		if f.T == "run" {
			runs <- f
			continue
		}
		pc.mu.Lock()
		ch := pc.waiting[f.ID]
		delete(pc.waiting, f.ID)
		pc.mu.Unlock()
		if ch != nil {
			ch <- f
		}
	}
}

func (pc *pipeCaller) CallTool(ctx context.Context, server, tool string, args json.RawMessage) (json.RawMessage, error) {
	if len(args) > maxArgs {
		return nil, &ToolError{Msg: fmt.Sprintf("the arguments are %d bytes of JSON, more than %s", len(args), SizeText(maxArgs))}
	}
	ch := make(chan *frame, 1)
	pc.mu.Lock()
	pc.next++
	id := pc.next
	pc.waiting[id] = ch
	pc.mu.Unlock()
	defer func() {
		pc.mu.Lock()
		delete(pc.waiting, id)
		pc.mu.Unlock()
	}()
	if err := pc.out.send(&frame{T: "call", ID: id, Server: server, Tool: tool, Args: args}); err != nil {
		return nil, &ToolError{Msg: err.Error()}
	}
	select {
	case f := <-ch:
		if f.Err != nil {
			if f.Err.Kind == "permission" {
				return nil, &PermissionError{Msg: f.Err.Msg}
			}
			return nil, &ToolError{Msg: f.Err.Msg}
		}
		return f.Result, nil
	case <-ctx.Done():
		return nil, &ToolError{Msg: ctx.Err().Error()}
	}
}
