// Command genopenapi writes the gateway's OpenAPI document (the output of
// httpgateway.GenerateOpenAPI) to the file named by its one argument.
// `make openapi` runs it; the result is committed as
// api/httpgateway/openapi.json and served at /v1/openapi.json.
package main

import (
	"fmt"
	"os"

	"github.com/coordd/coordd/api/httpgateway"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: genopenapi FILE")
		os.Exit(2)
	}
	doc, err := httpgateway.GenerateOpenAPI()
	if err == nil {
		err = os.WriteFile(os.Args[1], doc, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genopenapi:", err)
		os.Exit(1)
	}
}
