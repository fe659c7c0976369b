package auth

import (
	"net/http"
)

// CheckHTTP authenticates and authorises an HTTP request for a route that
// needs role need; the returned request's context carries the Identity.
// The error is ErrUnauthenticated or ErrPermissionDenied (wrapped).
func (a *Authenticator) CheckHTTP(r *http.Request, need Role) (*http.Request, error) {
	if need == RoleNone {
		return r, nil
	}
	c := Credentials{Authorization: r.Header.Get("Authorization")}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.PeerCertificates) > 0 {
		c.PeerCert = r.TLS.PeerCertificates[0]
	}
	who, err := a.Authenticate(c)
	if err == nil {
		err = Authorize(who, need)
	}
	if err != nil {
		return r, err
	}
	return r.WithContext(WithIdentity(r.Context(), who)), nil
}
