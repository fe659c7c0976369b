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
// answers 401 or 403 itself and returns ok=false then. trusted reports
// that the request proved a credential (or that the member has none to
// prove: insecure), which lets its connection keep its slot under a flood
// of slow clients (LimitedListener). A refused request's body is never
// waited for: the connection is closed after the answer, so a caller
// without credentials cannot hold it open by sending its body slowly.
func (g *Gateway) authorize(w http.ResponseWriter, r *http.Request) (_ *http.Request, trusted, ok bool) {
	a := g.server.Authenticator()
	if a == nil {
		return r, true, true
	}
	_, pattern := g.mux.Handler(r)
	need, _ := auth.RouteRole(pattern)
	r, err := a.CheckHTTP(r, need)
	if err == nil {
		return r, need != auth.RoleNone, true
	}
	if errors.Is(err, auth.ErrUnauthenticated) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="coordd"`)
	}
	skipBody(w, r)
	st, _ := status.FromError(auth.StatusOf(err))
	writeErrorStatus(w, grpcserver.HTTPStatus(st.Code()), st, "", "")
	return r, false, false
}
