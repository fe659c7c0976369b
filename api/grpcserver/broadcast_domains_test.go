package grpcserver

import (
	"testing"

	"github.com/coordd/coordd/commands/logpb"
)

// TestDomainNames: domainName is the inverse of domainsByName for every
// domain the API names, and every log domain but the unset one has an API
// name.
func TestDomainNames(t *testing.T) {
	for name, d := range domainsByName {
		if got := domainName(d); got != name {
			t.Errorf("domainName(%v) = %q, want %q", d, got, name)
		}
	}
	for n := range logpb.ResourceDomain_name {
		d := logpb.ResourceDomain(n)
		if name := domainName(d); d != 0 && domainsByName[name] != d {
			t.Errorf("log domain %v has no API name (got %q)", d, name)
		}
	}
}
