package httpgateway

import (
	_ "embed"
	"net/http"
)

// openAPIDoc is the committed OpenAPI document (see openapi_gen.go).
//
//go:embed openapi.json
var openAPIDoc []byte

func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDoc)
}
