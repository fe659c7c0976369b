package broadcaster

import (
	"testing"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// TestDomainNames: the API name NewRequest reads a domain by is the name
// Info shows it by, in any letter case, for every domain the vocabulary
// names; every log domain but the unset one has an API name.
func TestDomainNames(t *testing.T) {
	for _, name := range vocab.ResourceDomains() {
		for _, spelled := range []string{string(name), "x" + string(name)[1:]} {
			key := "k"
			if !name.TakesKey() {
				key = ""
			}
			c, err := NewRequest(&coordpb.BroadcastRequest{MessageType: "CreateIndex",
				ResourceKeys: []*coordpb.ResourceKey{{Domain: spelled, Key: key}}})
			if spelled != string(name) {
				if err == nil {
					t.Errorf("domain %q was read", spelled)
				}
				continue
			}
			if err != nil {
				t.Fatalf("domain %q: %v", spelled, err)
			}
			if got := domainName(c.req.ResourceKeys[0].Domain); got != string(name) {
				t.Errorf("domain %q is shown as %q", name, got)
			}
		}
	}
	for n := range logpb.ResourceDomain_name {
		d := logpb.ResourceDomain(n)
		if name := domainName(d); d != 0 {
			if got, ok := logDomain(name); !ok || got != d {
				t.Errorf("log domain %v has no API name (got %q)", d, name)
			}
		}
	}
}
