package httpgateway

import (
	"errors"
	"net/http"
	"sort"

	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/auth"
	"github.com/coordd/coordd/api/grpcserver"
)

// Patterns lists every ServeMux pattern the gateway serves, sorted, and
// the "/" fallback (the route/role test walks them all).
func (g *Gateway) Patterns() []string {
	out := append([]string{"/"}, g.patterns...)
	sort.Strings(out)
	return out
}

// authorize checks r against the route table when authentication is on; it
// answers 401 or 403 itself and returns ok=false then.
func (g *Gateway) authorize(w http.ResponseWriter, r *http.Request) (*http.Request, bool) {
	a := g.server.Authenticator()
	if a == nil {
		return r, true
	}
	_, pattern := g.mux.Handler(r)
	need, _ := auth.RouteRole(pattern)
	r, err := a.CheckHTTP(r, need)
	if err == nil {
		return r, true
	}
	if errors.Is(err, auth.ErrUnauthenticated) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="coordd"`)
	}
	st, _ := status.FromError(auth.StatusOf(err))
	writeErrorStatus(w, grpcserver.HTTPStatus(st.Code()), st, "", "")
	return r, false
}
