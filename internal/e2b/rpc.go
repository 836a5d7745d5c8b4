package e2b

import (
	"context"
	"errors"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/sandhold/sandhold/internal/dispatch"
	"github.com/sandhold/sandhold/internal/e2b/envdpb/filesystempb"
	"github.com/sandhold/sandhold/internal/e2b/envdpb/filesystempb/filesystempbconnect"
	"github.com/sandhold/sandhold/internal/e2b/envdpb/processpb"
	"github.com/sandhold/sandhold/internal/e2b/envdpb/processpb/processpbconnect"
	"github.com/sandhold/sandhold/internal/fault"
	"github.com/sandhold/sandhold/internal/workspace"
)

// envd's Connect RPC services: each method authenticates (serveSandbox
// did; a refusal is answered here, in Connect's protocol) and dispatches
// its tool.

var (
	_ processpbconnect.ProcessHandler       = processRPC{}
	_ filesystempbconnect.FilesystemHandler = fsRPC{}
)

// call is the request's authenticated call, or its refusal as a Connect
// error.
func (s *Service) call(ctx context.Context) (envdCall, error) {
	e := envdOf(ctx)
	if e.err != nil {
		return e, s.rpcError(ctx, e.err)
	}
	return e, nil
}

// keepaliveHeader is the SDK's request for keepalive events on a stream
// (seconds between them).
const keepaliveHeader = "Keepalive-Ping-Interval"

func keepaliveOf(h interface{ Get(string) string }) time.Duration {
	n, err := strconv.Atoi(h.Get(keepaliveHeader))
	if err != nil || n <= 0 {
		return 0
	}
	return min(time.Duration(n)*time.Second, maxKeepalive)
}

// timeoutOf is the RPC's Connect-Timeout-Ms: envd kills a process that
// long after its start (0: none).
func timeoutOf(h interface{ Get(string) string }) int64 {
	n, err := strconv.ParseInt(h.Get("Connect-Timeout-Ms"), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

type processRPC struct{ s *Service }

func (h processRPC) List(ctx context.Context, _ *connect.Request[processpb.ListRequest]) (*connect.Response[processpb.ListResponse], error) {
	e, err := h.s.call(ctx)
	if err != nil {
		return nil, err
	}
	ps, err := ToolProcessList.Call(ctx, h.s.d.Dispatch, e.caller, SandboxRef{On: dispatch.On{Sandbox: e.sandbox}})
	if err != nil {
		return nil, h.s.rpcError(ctx, err)
	}
	return connect.NewResponse(&processpb.ListResponse{Processes: ps}), nil
}

func (h processRPC) Start(ctx context.Context, req *connect.Request[processpb.StartRequest], stream *connect.ServerStream[processpb.StartResponse]) error {
	e, err := h.s.call(ctx)
	if err != nil {
		return err
	}
	m := req.Msg
	p := m.GetProcess()
	args := ProcessStartArgs{On: dispatch.On{Sandbox: e.sandbox}, Cmd: p.GetCmd(), Args: p.GetArgs(), Envs: p.GetEnvs(), Cwd: p.GetCwd(),
		Tag: m.GetTag(), Stdin: m.Stdin == nil || m.GetStdin(), User: e.user, TimeoutMS: timeoutOf(req.Header())}
	if m.Pty != nil {
		args.PTY = &PTYSize{Cols: m.GetPty().GetSize().GetCols(), Rows: m.GetPty().GetSize().GetRows()}
		args.Stdin = false
	}
	res, err := ToolProcessStart.Call(dispatch.WithStreaming(ctx), h.s.d.Dispatch, e.caller, args)
	if err != nil {
		return h.s.rpcError(ctx, err)
	}
	return h.s.follow(ctx, res.proc, res.sub, keepaliveOf(req.Header()), func(ev *processpb.ProcessEvent) error {
		return stream.Send(&processpb.StartResponse{Event: ev})
	})
}

func (h processRPC) Connect(ctx context.Context, req *connect.Request[processpb.ConnectRequest], stream *connect.ServerStream[processpb.ConnectResponse]) error {
	e, err := h.s.call(ctx)
	if err != nil {
		return err
	}
	ref, err := refOf(e, req.Msg.GetProcess())
	if err != nil {
		return h.s.rpcError(ctx, err)
	}
	res, err := ToolProcessConnect.Call(dispatch.WithStreaming(ctx), h.s.d.Dispatch, e.caller, ref)
	if err != nil {
		return h.s.rpcError(ctx, err)
	}
	return h.s.follow(ctx, res.proc, res.sub, keepaliveOf(req.Header()), func(ev *processpb.ProcessEvent) error {
		return stream.Send(&processpb.ConnectResponse{Event: ev})
	})
}

// follow sends a process's start event, then its events as they come,
// until its end event, the client leaving or a send failing (the process
// runs on: envd's processes outlive their clients).
func (s *Service) follow(ctx context.Context, pr *proc, sub *subscriber, keepalive time.Duration, send func(*processpb.ProcessEvent) error) error {
	defer pr.unsubscribe(sub)
	if err := send(&processpb.ProcessEvent{Event: &processpb.ProcessEvent_Start{Start: &processpb.ProcessEvent_StartEvent{Pid: pr.key.pid}}}); err != nil {
		return err
	}
	var tick <-chan time.Time
	if keepalive > 0 {
		t := time.NewTicker(keepalive)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case ev := <-sub.ch:
			if err := send(ev); err != nil {
				return err
			}
			if _, end := ev.Event.(*processpb.ProcessEvent_End); end {
				return nil
			}
		case <-tick:
			if err := send(&processpb.ProcessEvent{Event: &processpb.ProcessEvent_Keepalive{Keepalive: &processpb.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
		case <-ctx.Done():
			return connect.NewError(connect.CodeDeadlineExceeded, errors.New("the stream's timeout passed (the process was killed at it)"))
		}
	}
}

// refOf is the ProcessRef a selector names.
func refOf(e envdCall, sel *processpb.ProcessSelector) (ProcessRef, error) {
	r := ProcessRef{On: dispatch.On{Sandbox: e.sandbox}}
	switch v := sel.GetSelector().(type) {
	case *processpb.ProcessSelector_Pid:
		r.Pid = v.Pid
	case *processpb.ProcessSelector_Tag:
		r.Tag = v.Tag
	default:
		return r, fault.InvalidField("process", "name the process by pid or tag")
	}
	return r, nil
}

func (h processRPC) Update(ctx context.Context, req *connect.Request[processpb.UpdateRequest]) (*connect.Response[processpb.UpdateResponse], error) {
	e, err := h.s.call(ctx)
	if err != nil {
		return nil, err
	}
	ref, err := refOf(e, req.Msg.GetProcess())
	if err != nil {
		return nil, h.s.rpcError(ctx, err)
	}
	if req.Msg.Pty == nil {
		return connect.NewResponse(&processpb.UpdateResponse{}), nil
	}
	size := req.Msg.GetPty().GetSize()
	args := ProcessResizeArgs{ProcessRef: ref, Cols: size.GetCols(), Rows: size.GetRows()}
	if _, err := ToolProcessResize.Call(ctx, h.s.d.Dispatch, e.caller, args); err != nil {
		return nil, h.s.rpcError(ctx, err)
	}
	return connect.NewResponse(&processpb.UpdateResponse{}), nil
}

func (h processRPC) StreamInput(context.Context, *connect.ClientStream[processpb.StreamInputRequest]) (*connect.Response[processpb.StreamInputResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("StreamInput is not served: send input with SendInput"))
}

func (h processRPC) SendInput(ctx context.Context, req *connect.Request[processpb.SendInputRequest]) (*connect.Response[processpb.SendInputResponse], error) {
	e, err := h.s.call(ctx)
	if err != nil {
		return nil, err
	}
	ref, err := refOf(e, req.Msg.GetProcess())
	if err != nil {
		return nil, h.s.rpcError(ctx, err)
	}
	in := req.Msg.GetInput()
	data := in.GetStdin()
	if _, pty := in.GetInput().(*processpb.ProcessInput_Pty); pty {
		data = in.GetPty()
	}
	if _, err := ToolProcessInput.Call(ctx, h.s.d.Dispatch, e.caller, ProcessInputArgs{ProcessRef: ref, Data: data}); err != nil {
		return nil, h.s.rpcError(ctx, err)
	}
	return connect.NewResponse(&processpb.SendInputResponse{}), nil
}

func (h processRPC) SendSignal(ctx context.Context, req *connect.Request[processpb.SendSignalRequest]) (*connect.Response[processpb.SendSignalResponse], error) {
	e, err := h.s.call(ctx)
	if err != nil {
		return nil, err
	}
	ref, err := refOf(e, req.Msg.GetProcess())
	if err != nil {
		return nil, h.s.rpcError(ctx, err)
	}
	sig := "SIGKILL"
	switch req.Msg.GetSignal() {
	case processpb.Signal_SIGNAL_SIGTERM:
		sig = "SIGTERM"
	case processpb.Signal_SIGNAL_SIGKILL:
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("signal must be SIGTERM or SIGKILL"))
	}
	if _, err := ToolProcessSignal.Call(ctx, h.s.d.Dispatch, e.caller, ProcessSignalArgs{ProcessRef: ref, Signal: sig}); err != nil {
		return nil, h.s.rpcError(ctx, err)
	}
	return connect.NewResponse(&processpb.SendSignalResponse{}), nil
}

func (h processRPC) CloseStdin(ctx context.Context, req *connect.Request[processpb.CloseStdinRequest]) (*connect.Response[processpb.CloseStdinResponse], error) {
	e, err := h.s.call(ctx)
	if err != nil {
		return nil, err
	}
	ref, err := refOf(e, req.Msg.GetProcess())
	if err != nil {
		return nil, h.s.rpcError(ctx, err)
	}
	if _, err := ToolProcessCloseStdin.Call(ctx, h.s.d.Dispatch, e.caller, ref); err != nil {
		return nil, h.s.rpcError(ctx, err)
	}
	return connect.NewResponse(&processpb.CloseStdinResponse{}), nil
}

type fsRPC struct{ s *Service }

func (h fsRPC) pathArgs(e envdCall, p string) FSPathArgs {
	return FSPathArgs{On: dispatch.On{Sandbox: e.sandbox}, Path: p, Sudo: e.user == "root"}
}

func (h fsRPC) Stat(ctx context.Context, req *connect.Request[filesystempb.StatRequest]) (*connect.Response[filesystempb.StatResponse], error) {
	e, err := h.s.call(ctx)
	if err != nil {
		return nil, err
	}
	entry, err := ToolFSStat.Call(ctx, h.s.d.Dispatch, e.caller, h.pathArgs(e, req.Msg.GetPath()))
	if err != nil {
		return nil, h.s.rpcError(ctx, err)
	}
	return connect.NewResponse(&filesystempb.StatResponse{Entry: entry}), nil
}

func (h fsRPC) MakeDir(ctx context.Context, req *connect.Request[filesystempb.MakeDirRequest]) (*connect.Response[filesystempb.MakeDirResponse], error) {
	e, err := h.s.call(ctx)
	if err != nil {
		return nil, err
	}
	res, err := ToolFSMkdir.Call(ctx, h.s.d.Dispatch, e.caller, h.pathArgs(e, req.Msg.GetPath()))
	if err != nil {
		return nil, h.s.rpcError(ctx, err)
	}
	if res.Existed {
		return nil, connect.NewError(connect.CodeAlreadyExists, errors.New("directory "+absPath(req.Msg.GetPath())+" already exists"))
	}
	return connect.NewResponse(&filesystempb.MakeDirResponse{Entry: res.Entry}), nil
}

func (h fsRPC) Move(ctx context.Context, req *connect.Request[filesystempb.MoveRequest]) (*connect.Response[filesystempb.MoveResponse], error) {
	e, err := h.s.call(ctx)
	if err != nil {
		return nil, err
	}
	args := FSMoveArgs{On: dispatch.On{Sandbox: e.sandbox}, Source: req.Msg.GetSource(), Destination: req.Msg.GetDestination(), Sudo: e.user == "root"}
	entry, err := ToolFSMove.Call(ctx, h.s.d.Dispatch, e.caller, args)
	if err != nil {
		return nil, h.s.rpcError(ctx, err)
	}
	return connect.NewResponse(&filesystempb.MoveResponse{Entry: entry}), nil
}

func (h fsRPC) ListDir(ctx context.Context, req *connect.Request[filesystempb.ListDirRequest]) (*connect.Response[filesystempb.ListDirResponse], error) {
	e, err := h.s.call(ctx)
	if err != nil {
		return nil, err
	}
	args := FSListArgs{FSPathArgs: h.pathArgs(e, req.Msg.GetPath()), Depth: req.Msg.GetDepth()}
	entries, err := ToolFSList.Call(ctx, h.s.d.Dispatch, e.caller, args)
	if err != nil {
		return nil, h.s.rpcError(ctx, err)
	}
	return connect.NewResponse(&filesystempb.ListDirResponse{Entries: entries}), nil
}

func (h fsRPC) Remove(ctx context.Context, req *connect.Request[filesystempb.RemoveRequest]) (*connect.Response[filesystempb.RemoveResponse], error) {
	e, err := h.s.call(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := ToolFSRemove.Call(ctx, h.s.d.Dispatch, e.caller, h.pathArgs(e, req.Msg.GetPath())); err != nil {
		return nil, h.s.rpcError(ctx, err)
	}
	return connect.NewResponse(&filesystempb.RemoveResponse{}), nil
}

// eventTypes map the watch's event names onto envd's.
var eventTypes = map[string]filesystempb.EventType{
	"create": filesystempb.EventType_EVENT_TYPE_CREATE,
	"write":  filesystempb.EventType_EVENT_TYPE_WRITE,
	"remove": filesystempb.EventType_EVENT_TYPE_REMOVE,
	"rename": filesystempb.EventType_EVENT_TYPE_RENAME,
	"chmod":  filesystempb.EventType_EVENT_TYPE_CHMOD,
}

// watchBatch is how many events one read of a watch takes.
const watchBatch = 100

// WatchDir is file.watch_create, then file.watch_events streamed until the
// client leaves or the stream's timeout passes, then file.watch_delete.
// sandhold's watches poll (every 500 ms at the fastest), so events come
// that late and a rename shows as a remove and a create.
func (h fsRPC) WatchDir(ctx context.Context, req *connect.Request[filesystempb.WatchDirRequest], stream *connect.ServerStream[filesystempb.WatchDirResponse]) error {
	e, err := h.s.call(ctx)
	if err != nil {
		return err
	}
	if e.user == "root" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("watches run as the sandbox user here (user root is not available)"))
	}
	recursive := req.Msg.GetRecursive()
	d, c := h.s.d.Dispatch, e.caller
	info, err := workspace.ToolWatchCreate.Call(ctx, d, c, workspace.WatchCreateArgs{
		On: dispatch.On{Sandbox: e.sandbox}, Path: absPath(req.Msg.GetPath()), Recursive: &recursive, Exclude: []string{}})
	if err != nil {
		return h.s.rpcError(ctx, err)
	}
	ref := workspace.WatchRef{On: dispatch.On{Sandbox: e.sandbox}, WatcherID: info.WatcherID}
	defer func() {
		// The client left: the watch goes (a call of its own, on a
		// context that outlives the request).
		_, _ = workspace.ToolWatchDelete.Call(context.WithoutCancel(ctx), d, c, ref)
	}()
	w, err := workspace.ToolWatchEvents.Call(dispatch.WithStreaming(ctx), d, c, ref)
	if err != nil {
		return h.s.rpcError(ctx, err)
	}
	if err := stream.Send(&filesystempb.WatchDirResponse{Event: &filesystempb.WatchDirResponse_Start{Start: &filesystempb.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	keepalive := keepaliveOf(req.Header())
	if keepalive == 0 {
		keepalive = maxKeepalive
	}
	cursor := info.Cursor
	for {
		evs, next, _, ended := w.Next(ctx, cursor, watchBatch, keepalive)
		if ctx.Err() != nil {
			return connect.NewError(connect.CodeDeadlineExceeded, errors.New("the watch's timeout passed"))
		}
		cursor = next
		for _, ev := range evs {
			t, ok := eventTypes[ev.Type]
			if !ok {
				continue
			}
			if err := stream.Send(&filesystempb.WatchDirResponse{Event: &filesystempb.WatchDirResponse_Filesystem{
				Filesystem: &filesystempb.FilesystemEvent{Name: ev.RelativePath, Type: t}}}); err != nil {
				return err
			}
		}
		if ended {
			return connect.NewError(connect.CodeUnavailable, errors.New("the watch ended (its sandbox stopped, or it was stopped)"))
		}
		if len(evs) == 0 {
			if err := stream.Send(&filesystempb.WatchDirResponse{Event: &filesystempb.WatchDirResponse_Keepalive{Keepalive: &filesystempb.WatchDirResponse_KeepAlive{}}}); err != nil {
				return err
			}
		}
	}
}

func (h fsRPC) CreateWatcher(context.Context, *connect.Request[filesystempb.CreateWatcherRequest]) (*connect.Response[filesystempb.CreateWatcherResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("the polled watchers are not served: watch with WatchDir"))
}

func (h fsRPC) GetWatcherEvents(context.Context, *connect.Request[filesystempb.GetWatcherEventsRequest]) (*connect.Response[filesystempb.GetWatcherEventsResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("the polled watchers are not served: watch with WatchDir"))
}

func (h fsRPC) RemoveWatcher(context.Context, *connect.Request[filesystempb.RemoveWatcherRequest]) (*connect.Response[filesystempb.RemoveWatcherResponse], error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("the polled watchers are not served: watch with WatchDir"))
}
