package httpgateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// TestOpenAPIDocIsCurrent: the committed openapi.json is exactly what the
// generator makes from today's routes and protos.
func TestOpenAPIDocIsCurrent(t *testing.T) {
	doc, err := GenerateOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, openAPIDoc) {
		t.Fatal("api/httpgateway/openapi.json is stale: run `make openapi` and commit it")
	}
}

type openAPIDocument struct {
	Paths map[string]map[string]struct {
		OperationID  string `json:"operationId"`
		RequiresFlag string `json:"x-coordd-requires-flag"`
		Responses    map[string]struct {
			Content map[string]struct {
				Schema struct {
					Ref string `json:"$ref"`
				} `json:"schema"`
			} `json:"content"`
		} `json:"responses"`
	} `json:"paths"`
	Components struct {
		Schemas map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"schemas"`
	} `json:"components"`
}

func parseDoc(t *testing.T, b []byte) openAPIDocument {
	t.Helper()
	var d openAPIDocument
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return d
}

// docRoutes lists "METHOD /path" of every documented operation (those
// needing a flag only when withFlags).
func docRoutes(d openAPIDocument, withFlags bool) []string {
	var out []string
	for path, ops := range d.Paths {
		for m, op := range ops {
			if op.RequiresFlag != "" && !withFlags {
				continue
			}
			out = append(out, strings.ToUpper(m)+" "+path)
		}
	}
	sort.Strings(out)
	return out
}

// TestOpenAPIListsExactlyTheServedRoutes: every documented route reaches
// its own handler on a real gateway (not the 404/405 fallback), and every
// route the gateway registers is documented, with and without the routes
// that need a flag (pprof, fault injection).
func TestOpenAPIListsExactlyTheServedRoutes(t *testing.T) {
	d := parseDoc(t, openAPIDoc)
	for _, pprof := range []bool{false, true} {
		var opts []Option
		if pprof {
			opts = append(opts, WithPprof(), WithFaultInjection(fakeDelays{}))
		}
		g := New(shared.srv, Probes{Node: shared.node}, shared.metrics.Handler(), opts...)
		want := docRoutes(d, pprof)
		served := append([]string(nil), g.patterns...)
		sort.Strings(served)
		if strings.Join(served, "\n") != strings.Join(want, "\n") {
			t.Errorf("pprof=%v: served routes differ from the document\nserved:\n%s\ndocumented:\n%s", pprof, strings.Join(served, "\n"), strings.Join(want, "\n"))
		}
		for _, r := range want {
			method, path, _ := strings.Cut(r, " ")
			_, pattern := g.mux.Handler(httptest.NewRequest(method, path, nil))
			if pattern != r {
				t.Errorf("pprof=%v: %s is documented but the gateway routes it to %q", pprof, r, pattern)
			}
		}
	}
}

// TestOpenAPISchemasMatchTheWireFormat: the properties of every documented
// response are exactly the field names the gateway writes for it.
func TestOpenAPISchemasMatchTheWireFormat(t *testing.T) {
	d := parseDoc(t, openAPIDoc)
	for _, r := range routes(nil) {
		desc := r.call.resp
		schema, ok := d.Components.Schemas[string(desc.FullName())]
		if !ok {
			t.Errorf("%s %s: response %s has no schema", r.method, r.path, desc.FullName())
			continue
		}
		var wrote map[string]json.RawMessage
		if err := json.Unmarshal(marshalJSON(newMessage(desc)), &wrote); err != nil {
			t.Fatal(err)
		}
		if got, want := keys(schema.Properties), keys(wrote); got != want {
			t.Errorf("%s: schema properties %s, gateway writes %s", desc.FullName(), got, want)
		}
		op := d.Paths[r.path][strings.ToLower(r.method)]
		if ref := op.Responses["200"].Content["application/json"].Schema.Ref; ref != "#/components/schemas/"+string(desc.FullName()) {
			t.Errorf("%s %s: 200 response refers to %q", r.method, r.path, ref)
		}
	}
}

func keys[V any](m map[string]V) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

// TestOpenAPIServed: GET /v1/openapi.json answers the committed document.
func TestOpenAPIServed(t *testing.T) {
	resp, err := shared.client.Get(shared.http.URL + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || !bytes.Equal(body, openAPIDoc) {
		t.Fatalf("GET /v1/openapi.json: %d %s, %d bytes", resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}
	if r, err := shared.client.Post(shared.http.URL+"/v1/openapi.json", "application/json", nil); err != nil || r.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /v1/openapi.json: %v %v, want 405", r, err)
	}
}

// TestPprofOnlyWhenEnabled: /debug/pprof/ is 404 unless WithPprof.
func TestPprofOnlyWhenEnabled(t *testing.T) {
	for _, on := range []bool{false, true} {
		var opts []Option
		if on {
			opts = append(opts, WithPprof())
		}
		g := New(shared.srv, Probes{Node: shared.node}, shared.metrics.Handler(), opts...)
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/goroutine?debug=1", nil))
		want := http.StatusNotFound
		if on {
			want = http.StatusOK
		}
		if rec.Code != want {
			t.Errorf("pprof enabled=%v: %d, want %d", on, rec.Code, want)
		}
	}
}

// newMessage makes an empty message of md's Go type.
func newMessage(md protoreflect.MessageDescriptor) proto.Message {
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
	if err != nil {
		panic(fmt.Sprintf("message %s is not registered: %v", md.FullName(), err))
	}
	return mt.New().Interface()
}
