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
)

// maxBodyBytes bounds a request body.
const maxBodyBytes = 1 << 20

// route binds one HTTP method and path to one RPC handler.
type route struct {
	method string
	path   string
	// newReq returns an empty request; nil for routes with no body.
	newReq func() proto.Message
	call   func(ctx context.Context, req proto.Message) (proto.Message, error)
}

// rpc adapts a typed handler to the route table.
func rpc[Req proto.Message, Resp proto.Message](newReq func() Req, h func(context.Context, Req) (Resp, error)) (func() proto.Message, func(context.Context, proto.Message) (proto.Message, error)) {
	return func() proto.Message { return newReq() },
		func(ctx context.Context, m proto.Message) (proto.Message, error) { return h(ctx, m.(Req)) }
}

// routes is the one table of HTTP endpoints; the README documents it.
func routes(s *grpcserver.Server) []route {
	var rs []route
	add := func(method, path string, newReq func() proto.Message, call func(context.Context, proto.Message) (proto.Message, error)) {
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
	return append(rs, broadcastRoutes(s)...)
}

// Gateway is the HTTP handler of one node.
type Gateway struct {
	mux     *http.ServeMux
	server  *grpcserver.Server
	timeout time.Duration
}

// New builds the gateway. probes supplies /healthz and /readyz, metrics
// /metrics.
func New(s *grpcserver.Server, probes Probes, metrics http.Handler) *Gateway {
	g := &Gateway{mux: http.NewServeMux(), server: s, timeout: 10 * time.Second}
	for _, r := range routes(s) {
		g.mux.HandleFunc(r.method+" "+r.path, g.serveRPC(r))
	}
	g.mux.HandleFunc("GET /v1/snapshot", g.serveSnapshot)
	g.mux.HandleFunc("GET /healthz", probes.healthz)
	g.mux.HandleFunc("GET /readyz", probes.readyz)
	g.mux.Handle("GET /metrics", metrics)
	allowed := map[string][]string{"/v1/snapshot": {http.MethodGet}, "/healthz": {http.MethodGet},
		"/readyz": {http.MethodGet}, "/metrics": {http.MethodGet}}
	for _, r := range routes(s) {
		allowed[r.path] = append(allowed[r.path], r.method)
	}
	g.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if methods, ok := allowed[r.URL.Path]; ok {
			w.Header().Set("Allow", strings.Join(methods, ", "))
			writeErrorStatus(w, http.StatusMethodNotAllowed,
				status.New(codes.Unimplemented, fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(methods, ", "))), "", "")
			return
		}
		writeError(w, status.Error(codes.NotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)), "", "")
	})
	return g
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
		if err := decodeRequest(r, req); err != nil {
			code := http.StatusBadRequest
			if errors.Is(err, errMediaType) {
				code = http.StatusUnsupportedMediaType
			}
			writeErrorStatus(w, code, status.New(codes.InvalidArgument, err.Error()), "", "")
			return
		}
		resp, err := rt.call(ctx, req)
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

func writeErrorStatus(w http.ResponseWriter, httpCode int, st *status.Status, leaderID, leaderGRPC string) {
	var body errorBody
	body.Error.Code = st.Code().String()
	body.Error.Message = st.Message()
	if st.Code() == codes.Unavailable {
		body.Error.LeaderID, body.Error.LeaderGRPC = leaderID, leaderGRPC
	}
	w.Header().Set("Content-Type", "application/json")
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
