package httpgateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/coordd/coordd/api/coordpb" // registers the API's descriptors
)

// GenerateOpenAPI builds the OpenAPI 3.0 document of every endpoint the
// gateway serves, from the route table (routes and extraRoutes) and the
// proto descriptors of each RPC's request and response. Schemas follow what
// the gateway really reads and writes (json.go): snake_case field names,
// enums by name, 64-bit integers as JSON numbers. The committed
// openapi.json is this function's output (`make openapi`); a test fails
// when they differ, and another checks the document against the routes the
// gateway registers, both ways.
func GenerateOpenAPI() ([]byte, error) {
	b := docBuilder{schemas: map[string]any{}}
	paths := map[string]map[string]any{}
	op := func(path, method string, o map[string]any) error {
		if paths[path] == nil {
			paths[path] = map[string]any{}
		}
		m := strings.ToLower(method)
		if _, dup := paths[path][m]; dup {
			return fmt.Errorf("%s %s listed twice", method, path)
		}
		paths[path][m] = o
		return nil
	}
	for _, r := range routes(nil) {
		if err := op(r.path, r.method, b.rpcOperation(r)); err != nil {
			return nil, err
		}
	}
	for _, r := range (&Gateway{}).extraRoutes(Probes{}, nil) {
		content := map[string]any{"schema": map[string]any{"type": "string"}}
		if r.contentType == "application/json" {
			content = map[string]any{"schema": map[string]any{"type": "object"}}
		}
		o := map[string]any{
			"operationId": operationID(r.path),
			"summary":     r.summary,
			"tags":        []string{"operations"},
			"responses": map[string]any{
				"200":     map[string]any{"description": "OK", "content": map[string]any{r.contentType: content}},
				"default": errorResponse,
			},
		}
		if r.flag != "" {
			o["x-coordd-requires-flag"] = r.flag
		}
		if err := op(r.path, r.method, o); err != nil {
			return nil, err
		}
	}
	b.schemas["Error"] = errorSchema
	doc := map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{
			"title":   "coordd HTTP/JSON API",
			"version": "v1",
			"description": "Generated from the HTTP gateway's route table and the proto definitions under api/proto " +
				"(do not edit; run `make openapi`). Every RPC answers JSON with snake_case field names, every field present, " +
				"enums by name and 64-bit integers as JSON numbers. GET routes take the request's scalar fields as query " +
				"parameters; POST routes take the request as a JSON body (Content-Type: application/json). Errors answer " +
				"{\"error\":{\"code\",\"message\",\"leader_id\",\"leader_grpc_addr\"}} with the HTTP status of the gRPC code. " +
				"X-Request-Id names a request in the member's logs.",
		},
		"paths":      paths,
		"components": map[string]any{"schemas": b.schemas},
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

var errorResponse = map[string]any{
	"description": "An error (the gRPC status code by name, and a message)",
	"content":     map[string]any{"application/json": map[string]any{"schema": ref("Error")}},
}

var errorSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{"error": map[string]any{
		"type": "object",
		"properties": map[string]any{
			"code":             map[string]any{"type": "string"},
			"message":          map[string]any{"type": "string"},
			"leader_id":        map[string]any{"type": "string"},
			"leader_grpc_addr": map[string]any{"type": "string"},
		},
	}},
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

// operationID names a non-RPC route after its path: /v1/openapi.json →
// openapi_json.
func operationID(path string) string {
	p := strings.TrimPrefix(strings.TrimPrefix(path, "/v1"), "/")
	return strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(p)
}

type docBuilder struct {
	schemas map[string]any
}

// rpcOperation describes one RPC route: its gRPC method (found by name and
// request type among the registered services), its query parameters (GET)
// or JSON body (POST), and its response.
func (b *docBuilder) rpcOperation(r route) map[string]any {
	req := r.newReq().ProtoReflect().Descriptor()
	tag, grpcName := grpcMethod(r.call.name, req)
	o := map[string]any{
		"operationId": r.call.name,
		"tags":        []string{tag},
		"summary":     "gRPC " + grpcName,
		"responses": map[string]any{
			"200": map[string]any{"description": "OK", "content": map[string]any{
				"application/json": map[string]any{"schema": ref(b.message(r.call.resp))}}},
			"default": errorResponse,
		},
	}
	if r.method == http.MethodGet {
		var params []any
		fields := req.Fields()
		for i := 0; i < fields.Len(); i++ {
			fd := fields.Get(i)
			if fd.IsList() || fd.IsMap() || fd.Message() != nil {
				continue // a query string cannot carry these
			}
			params = append(params, map[string]any{"name": string(fd.Name()), "in": "query", "required": false, "schema": b.scalar(fd)})
		}
		if len(params) > 0 {
			o["parameters"] = params
		}
	} else {
		o["requestBody"] = map[string]any{"required": false, "content": map[string]any{
			"application/json": map[string]any{"schema": ref(b.message(req))}}}
	}
	return o
}

// grpcMethod finds the gRPC method an HTTP route serves: the method named
// like the handler with the route's request type, else (a stream served as
// a snapshot over HTTP) the one method taking that request type.
func grpcMethod(handler string, req protoreflect.MessageDescriptor) (service, full string) {
	var byType []string
	var byTypeSvc string
	protoregistry.GlobalFiles.RangeFilesByPackage("coordd.v1", func(fd protoreflect.FileDescriptor) bool {
		if fd.Package() != "coordd.v1" {
			return true
		}
		for i := 0; i < fd.Services().Len(); i++ {
			sd := fd.Services().Get(i)
			for j := 0; j < sd.Methods().Len(); j++ {
				md := sd.Methods().Get(j)
				if md.Input().FullName() != req.FullName() {
					continue
				}
				name := string(sd.FullName()) + "/" + string(md.Name())
				if string(md.Name()) == handler {
					service, full = string(sd.Name()), name
					return false
				}
				byType, byTypeSvc = append(byType, name), string(sd.Name())
			}
		}
		return true
	})
	if full != "" {
		return service, full
	}
	sort.Strings(byType)
	if len(byType) == 1 {
		return byTypeSvc, byType[0] + " (its current state, once)"
	}
	return "other", handler
}

// message adds md's schema (and those it refers to) and returns its name.
func (b *docBuilder) message(md protoreflect.MessageDescriptor) string {
	name := string(md.FullName())
	if _, ok := b.schemas[name]; ok {
		return name
	}
	props := map[string]any{}
	schema := map[string]any{"type": "object", "properties": props}
	b.schemas[name] = schema // before the fields: messages may nest themselves
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		var s map[string]any
		switch {
		case fd.IsMap():
			s = map[string]any{"type": "object", "additionalProperties": b.value(fd.MapValue())}
		case fd.IsList():
			s = map[string]any{"type": "array", "items": b.value(fd)}
		case fd.Message() != nil:
			// A message field the gateway writes as null when unset.
			s = map[string]any{"nullable": true, "allOf": []any{ref(b.message(fd.Message()))}}
		default:
			s = b.scalar(fd)
		}
		props[string(fd.Name())] = s
	}
	return name
}

func (b *docBuilder) value(fd protoreflect.FieldDescriptor) map[string]any {
	if fd.Message() != nil {
		return ref(b.message(fd.Message()))
	}
	return b.scalar(fd)
}

// scalar is the JSON schema of a non-message field as json.go writes it.
func (b *docBuilder) scalar(fd protoreflect.FieldDescriptor) map[string]any {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		var names []string
		vals := fd.Enum().Values()
		for i := 0; i < vals.Len(); i++ {
			names = append(names, string(vals.Get(i).Name()))
		}
		return map[string]any{"type": "string", "enum": names}
	case protoreflect.StringKind:
		return map[string]any{"type": "string"}
	case protoreflect.BytesKind:
		return map[string]any{"type": "string", "format": "byte"}
	case protoreflect.BoolKind:
		return map[string]any{"type": "boolean"}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return map[string]any{"type": "integer", "format": "int32"}
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return map[string]any{"type": "integer", "format": "int64", "minimum": 0, "maximum": 4294967295}
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return map[string]any{"type": "integer", "format": "int64"}
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return map[string]any{"type": "integer", "format": "uint64", "minimum": 0}
	case protoreflect.FloatKind:
		return map[string]any{"type": "number", "format": "float"}
	case protoreflect.DoubleKind:
		return map[string]any{"type": "number", "format": "double"}
	}
	return map[string]any{}
}
