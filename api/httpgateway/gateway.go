// Package httpgateway serves every coordd RPC as HTTP/JSON over the same
// handlers as gRPC (one implementation per endpoint), plus the operational
// endpoints /healthz, /readyz and /metrics.
package httpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/pprof"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/api/grpcserver"
	"github.com/coordd/coordd/api/statuspage"
	"github.com/coordd/coordd/raftnode"
)

// maxBodyBytes bounds a request body.
const maxBodyBytes = 1 << 20

// route binds one HTTP method and path to one RPC handler.
type route struct {
	method string
	path   string
	// newReq returns an empty request; nil for routes with no body.
	newReq func() proto.Message
	call   rpcCall
}

// rpcCall is one RPC handler with what the OpenAPI generator needs to know
// about it: its name and its response message.
type rpcCall struct {
	fn   func(ctx context.Context, req proto.Message) (proto.Message, error)
	name string // the handler's method name on grpcserver.Server
	resp protoreflect.MessageDescriptor
}

// rpc adapts a typed handler to the route table.
func rpc[Req proto.Message, Resp proto.Message](newReq func() Req, h func(context.Context, Req) (Resp, error)) (func() proto.Message, rpcCall) {
	var zero Resp
	return func() proto.Message { return newReq() },
		rpcCall{
			fn:   func(ctx context.Context, m proto.Message) (proto.Message, error) { return h(ctx, m.(Req)) },
			name: handlerName(h),
			resp: zero.ProtoReflect().Descriptor(),
		}
}

// handlerName is the method name of a method value such as s.Status
// ("github.com/.../grpcserver.(*Server).Status-fm" → "Status").
func handlerName(h any) string {
	f := runtime.FuncForPC(reflect.ValueOf(h).Pointer())
	if f == nil {
		return ""
	}
	name := strings.TrimSuffix(f.Name(), "-fm")
	return name[strings.LastIndex(name, ".")+1:]
}

// routes is the one table of HTTP endpoints; the README documents it.
func routes(s *grpcserver.Server) []route {
	var rs []route
	add := func(method, path string, newReq func() proto.Message, call rpcCall) {
		rs = append(rs, route{method: method, path: path, newReq: newReq, call: call})
	}
	nr, c := rpc(func() *coordpb.StatusRequest { return &coordpb.StatusRequest{} }, s.Status)
	add(http.MethodGet, "/v1/cluster/status", nr, c)
	nr, c = rpc(func() *coordpb.MembersRequest { return &coordpb.MembersRequest{} }, s.Members)
	add(http.MethodGet, "/v1/cluster/members", nr, c)
	nr, c = rpc(func() *coordpb.AddVoterRequest { return &coordpb.AddVoterRequest{} }, s.AddVoter)
	add(http.MethodPost, "/v1/cluster/members", nr, c)
	nr, c = rpc(func() *coordpb.RemoveMemberRequest { return &coordpb.RemoveMemberRequest{} }, s.RemoveMember)
	add(http.MethodPost, "/v1/cluster/members/remove", nr, c)
	nr, c = rpc(func() *coordpb.TransferLeaderRequest { return &coordpb.TransferLeaderRequest{} }, s.TransferLeader)
	add(http.MethodPost, "/v1/cluster/transfer-leader", nr, c)
	nr, c = rpc(func() *coordpb.RegisterMemberRequest { return &coordpb.RegisterMemberRequest{} }, s.RegisterMember)
	add(http.MethodPost, "/v1/cluster/register", nr, c)
	nr, c = rpc(func() *coordpb.AllocTimestampRequest { return &coordpb.AllocTimestampRequest{} }, s.AllocTimestamp)
	add(http.MethodPost, "/v1/alloc/timestamp", nr, c)
	nr, c = rpc(func() *coordpb.AllocIDRequest { return &coordpb.AllocIDRequest{} }, s.AllocID)
	add(http.MethodPost, "/v1/alloc/id", nr, c)
	rs = append(rs, channelRoutes(s)...)
	rs = append(rs, dataRoutes(s)...)
	rs = append(rs, manifestRoutes(s)...)
	rs = append(rs, diagnosticsRoutes(s)...)
	rs = append(rs, tokenRoutes(s)...)
	return append(rs, broadcastRoutes(s)...)
}

// Gateway is the HTTP handler of one node.
type Gateway struct {
	mux     *http.ServeMux
	server  *grpcserver.Server
	timeout time.Duration
	// delays is the member's fault-injection hook (nil: off).
	delays RaftDelayer
	// patterns lists every "METHOD /path" registered on mux, in order: the
	// OpenAPI test checks it against the document both ways.
	patterns []string
}

// extraRoute is an endpoint that is not an RPC; the OpenAPI document lists
// these too (summary and content type of the answer).
type extraRoute struct {
	method, path, summary, contentType string
	handler                            http.Handler
	// flag, when set, is the coordd flag without which the route is not
	// served (--enable-pprof, --fault-injection).
	flag string
}

// extraRoutes are the non-RPC endpoints. Handlers may be nil when only the
// table is wanted (the OpenAPI generator).
func (g *Gateway) extraRoutes(probes Probes, metrics http.Handler) []extraRoute {
	return []extraRoute{
		{http.MethodGet, "/v1/snapshot", "A consistent snapshot of the state machine, from the leader", "application/octet-stream", http.HandlerFunc(g.serveSnapshot), ""},
		{http.MethodGet, "/healthz", "Liveness: the process serves HTTP", "application/json", http.HandlerFunc(probes.healthz), ""},
		{http.MethodGet, "/readyz", "Readiness: a leader is known and this member is caught up", "application/json", http.HandlerFunc(probes.readyz), ""},
		{http.MethodGet, "/metrics", "Prometheus metrics of this member", "text/plain", metrics, ""},
		{http.MethodGet, "/ui", "The status page (HTML, reloads itself; ?refresh=SECONDS, 0 = never)", "text/html", g.statusPage(probes.Node), ""},
		{http.MethodGet, "/v1/openapi.json", "This OpenAPI document", "application/json", http.HandlerFunc(serveOpenAPI), ""},
		{http.MethodGet, "/debug/pprof/", "Go profiles (index and named profiles); only with --enable-pprof", "text/plain", http.HandlerFunc(pprof.Index), flagPprof},
		{http.MethodGet, "/debug/pprof/profile", "CPU profile (?seconds=N); only with --enable-pprof", "application/octet-stream", http.HandlerFunc(pprof.Profile), flagPprof},
		{http.MethodGet, "/debug/pprof/symbol", "Symbol lookup; only with --enable-pprof", "text/plain", http.HandlerFunc(pprof.Symbol), flagPprof},
		{http.MethodGet, "/debug/pprof/trace", "Execution trace (?seconds=N); only with --enable-pprof", "application/octet-stream", http.HandlerFunc(pprof.Trace), flagPprof},
		{http.MethodGet, "/debug/raft-delay", "TEST ONLY: the raft RPC delays in force on this member; only with --fault-injection", "application/json", http.HandlerFunc(g.serveRaftDelay), flagFaults},
		{http.MethodPost, "/debug/raft-delay", "TEST ONLY: hold every raft RPC of a kind this member receives ({\"kind\",\"delay_ms\"}); only with --fault-injection", "application/json", http.HandlerFunc(g.serveRaftDelay), flagFaults},
		{http.MethodPost, "/debug/replay-snapshot", "TEST ONLY: deliver the last InstallSnapshot this member received to itself again, as a late stream would; only with --fault-injection", "application/json", http.HandlerFunc(g.serveReplaySnapshot), flagFaults},
	}
}

// Option configures a Gateway.
type Option func(*gatewayOptions)

type gatewayOptions struct {
	pprof  bool
	delays RaftDelayer
}

// Flags that turn routes on.
const (
	flagPprof  = "--enable-pprof"
	flagFaults = "--fault-injection"
)

// WithPprof serves Go's profiles under /debug/pprof/ (coordd
// --enable-pprof): they reveal memory contents and cost CPU, so they are
// off unless asked for.
func WithPprof() Option { return func(o *gatewayOptions) { o.pprof = true } }

// WithFaultInjection serves /debug/raft-delay over d (coordd
// --fault-injection, the Jepsen-style suite's raft-delay nemesis).
func WithFaultInjection(d RaftDelayer) Option { return func(o *gatewayOptions) { o.delays = d } }

// New builds the gateway. probes supplies /healthz and /readyz, metrics
// /metrics.
func New(s *grpcserver.Server, probes Probes, metrics http.Handler, opts ...Option) *Gateway {
	var o gatewayOptions
	for _, opt := range opts {
		opt(&o)
	}
	g := &Gateway{mux: http.NewServeMux(), server: s, timeout: 10 * time.Second, delays: o.delays}
	on := map[string]bool{"": true, flagPprof: o.pprof, flagFaults: o.delays != nil}
	allowed := map[string][]string{}
	handle := func(method, path string, h http.Handler) {
		g.patterns = append(g.patterns, method+" "+path)
		g.mux.Handle(method+" "+path, h)
		allowed[path] = append(allowed[path], method)
	}
	for _, r := range routes(s) {
		handle(r.method, r.path, g.serveRPC(r))
	}
	for _, r := range g.extraRoutes(probes, metrics) {
		if !on[r.flag] {
			continue
		}
		handle(r.method, r.path, r.handler)
	}
	// The fallback is not in patterns (it is no route of the API); its row
	// in auth's route table needs no credentials, so a caller without any
	// learns only that a path does not exist.
	g.mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if methods, ok := allowed[r.URL.Path]; ok {
			w.Header().Set("Allow", strings.Join(methods, ", "))
			writeErrorStatus(w, http.StatusMethodNotAllowed,
				status.New(codes.Unimplemented, fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(methods, ", "))), "", "")
			return
		}
		writeError(w, status.Error(codes.NotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)), "", "")
	}))
	return g
}

// statusPage serves /ui from this member's API server; node, when set,
// tells it which durable writes of the member fail (a full disk).
func (g *Gateway) statusPage(node *raftnode.Node) http.Handler {
	if g.server == nil {
		return nil
	}
	c, scheme := &http.Client{Timeout: 2 * time.Second}, "http"
	if tc := g.server.PeerTLS(); tc != nil {
		c.Transport, scheme = &http.Transport{TLSClientConfig: tc}, "https"
	}
	h := statuspage.Handler{Source: g.server, Peer: statuspage.HTTPPeerStatus(c, scheme),
		PeerStorage: statuspage.HTTPPeerStorage(c, scheme), Now: time.Now, Scheme: scheme}
	if node != nil {
		h.StateSize = func() (int64, int64) { s := node.StateSize(); return s.Bytes, s.Budget }
		h.Storage = func() []string {
			var out []string
			for _, f := range node.StorageFaults() {
				out = append(out, f.Error())
			}
			return out
		}
	}
	return h
}

// ServeHTTP serves one request. A handler panic is logged and counted by
// the API server and answered 500 Internal; the process keeps serving.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			route := r.Pattern
			if route == "" {
				route = "unmatched"
			}
			writeError(w, g.server.Recovered(r.Context(), "http", route, v), "", "")
		}
	}()
	r, trusted, ok := g.authorize(w, r)
	if !ok {
		return
	}
	if err := deliverBody(r); err != nil {
		skipBody(w, r)
		writeErrorStatus(w, http.StatusBadRequest, status.New(codes.InvalidArgument, err.Error()), "", "")
		return
	}
	if c := connOf(r.Context()); c != nil {
		c.beginWork()
		defer c.endWork(trusted)
	}
	g.mux.ServeHTTP(w, r)
}

var unmarshal = protojson.UnmarshalOptions{DiscardUnknown: false}

func (g *Gateway) serveRPC(rt route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), g.timeout)
		defer cancel()
		if id := r.Header.Get("X-Request-Id"); id != "" {
			ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(grpcserver.MDRequestID, id))
		}
		req := rt.newReq()
		err := decodeRequest(r, req)
		// Every line logged while serving the request names it; the ID
		// (the caller's X-Request-Id, the request's request_id, or a fresh
		// one) is sent back in X-Request-Id.
		ctx, id := g.server.WithRequestLogger(ctx, req)
		w.Header().Set("X-Request-Id", id)
		start := time.Now()
		defer func() {
			g.server.Logger(ctx).Debug("http call", "route", rt.method+" "+rt.path, "duration", time.Since(start))
		}()
		if err != nil {
			code := http.StatusBadRequest
			if errors.Is(err, errMediaType) {
				code = http.StatusUnsupportedMediaType
			}
			writeErrorStatus(w, code, status.New(codes.InvalidArgument, err.Error()), "", "")
			return
		}
		resp, err := rt.call.fn(ctx, req)
		if err != nil {
			if _, ok := status.FromError(err); !ok && !errors.Is(err, context.DeadlineExceeded) {
				err = status.Error(codes.Internal, err.Error())
			}
			g.server.LogFailure(ctx, rt.method+" "+rt.path, req, err)
			id, addr := g.server.LeaderHint()
			writeError(w, err, id, addr)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(marshalJSON(resp))
		_, _ = w.Write([]byte("\n"))
	}
}

// decodeRequest reads a JSON body (POST) or query parameters (GET: each
// parameter is a field of the request, e.g. ?consistency=STALE).
func decodeRequest(r *http.Request, req proto.Message) error {
	if r.Method == http.MethodGet {
		q := r.URL.Query()
		if len(q) == 0 {
			return nil
		}
		obj := map[string]any{}
		fields := req.ProtoReflect().Descriptor().Fields()
		for k, v := range q {
			if len(v) != 1 {
				return fmt.Errorf("query parameter %q given %d times", k, len(v))
			}
			obj[k] = queryValue(fields.ByName(protoreflect.Name(k)), v[0])
		}
		data, _ := json.Marshal(obj)
		if err := unmarshal.Unmarshal(data, req); err != nil {
			return fmt.Errorf("bad query: %v", err)
		}
		return nil
	}
	if err := checkJSONBody(r); err != nil {
		return err
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return fmt.Errorf("read body: %v", err)
	}
	if len(body) > maxBodyBytes {
		return fmt.Errorf("body over %d bytes", maxBodyBytes)
	}
	if len(body) == 0 {
		return nil
	}
	if err := unmarshal.Unmarshal(body, req); err != nil {
		return fmt.Errorf("bad JSON body: %s", snakeFieldNames(err.Error(), req.ProtoReflect().Descriptor()))
	}
	return nil
}

var errMediaType = errors.New("unsupported media type")

// checkJSONBody refuses a request body that is not declared JSON: a body
// needs Content-Type application/json (which also keeps cross-site HTML
// forms, which cannot send it, from reaching a route).
func checkJSONBody(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.ContentLength == 0 {
		return nil // no body at all
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return fmt.Errorf("%w: the body must be JSON with Content-Type: application/json, got %q", errMediaType, ct)
	}
	return nil
}

// snakeFieldNames rewrites the JSON (lowerCamel) field names of md and its
// nested messages in a decoder message to the snake_case names the API
// documents.
func snakeFieldNames(msg string, md protoreflect.MessageDescriptor) string {
	seen := map[protoreflect.FullName]bool{}
	var walk func(md protoreflect.MessageDescriptor)
	walk = func(md protoreflect.MessageDescriptor) {
		if seen[md.FullName()] {
			return
		}
		seen[md.FullName()] = true
		fields := md.Fields()
		for i := 0; i < fields.Len(); i++ {
			fd := fields.Get(i)
			if fd.JSONName() != fd.TextName() {
				msg = strings.ReplaceAll(msg, " "+fd.JSONName(), " "+fd.TextName())
				msg = strings.ReplaceAll(msg, `"`+fd.JSONName()+`"`, `"`+fd.TextName()+`"`)
			}
			if m := fd.Message(); m != nil {
				walk(m)
			}
		}
	}
	walk(md)
	return msg
}

// queryValue gives a query parameter the JSON type its field expects
// (booleans and numbers unquoted); anything unparsable stays a string so
// the proto decoder reports it.
func queryValue(fd protoreflect.FieldDescriptor, v string) any {
	if fd == nil {
		return v
	}
	switch fd.Kind() {
	case protoreflect.BoolKind:
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
	case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Uint32Kind, protoreflect.Uint64Kind,
		protoreflect.Sint32Kind, protoreflect.Sint64Kind, protoreflect.Fixed32Kind, protoreflect.Fixed64Kind,
		protoreflect.Sfixed32Kind, protoreflect.Sfixed64Kind:
		if _, err := strconv.ParseFloat(v, 64); err == nil {
			return json.Number(v)
		}
	}
	return v
}

// errorBody is the JSON shape of every gateway error.
type errorBody struct {
	Error struct {
		Code       string `json:"code"`
		Message    string `json:"message"`
		LeaderID   string `json:"leader_id,omitempty"`
		LeaderGRPC string `json:"leader_grpc_addr,omitempty"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, err error, leaderID, leaderGRPC string) {
	st, ok := status.FromError(err)
	if !ok {
		st = status.New(codes.Internal, err.Error())
	}
	if errors.Is(err, context.DeadlineExceeded) {
		st = status.New(codes.DeadlineExceeded, err.Error())
	}
	writeErrorStatus(w, grpcserver.HTTPStatus(st.Code()), st, leaderID, leaderGRPC)
}

// retryAfterSeconds is the Retry-After of a 429: whole seconds, at least
// raftnode.OverloadRetryAfter.
var retryAfterSeconds = strconv.Itoa(int(max(1, (raftnode.OverloadRetryAfter+time.Second-1)/time.Second)))

func writeErrorStatus(w http.ResponseWriter, httpCode int, st *status.Status, leaderID, leaderGRPC string) {
	var body errorBody
	body.Error.Code = st.Code().String()
	body.Error.Message = st.Message()
	if st.Code() == codes.Unavailable {
		body.Error.LeaderID, body.Error.LeaderGRPC = leaderID, leaderGRPC
	}
	w.Header().Set("Content-Type", "application/json")
	if httpCode == http.StatusTooManyRequests {
		// 429 is only ever a transient refusal (the proposal queue was
		// full); deterministic capacity refusals are 412.
		w.Header().Set("Retry-After", retryAfterSeconds)
	}
	w.WriteHeader(httpCode)
	_ = json.NewEncoder(w).Encode(body)
}

func (g *Gateway) serveSnapshot(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	w.Header().Set("Content-Type", "application/octet-stream")
	if err := g.server.WriteSnapshot(ctx, w); err != nil {
		id, addr := g.server.LeaderHint()
		writeError(w, err, id, addr)
	}
}
