package vocab

import "strings"

// ResourceDomain is the kind of object a broadcast's resource key locks,
// spelled as the public API spells it.
type ResourceDomain string

// The resource-key domains. CLUSTER and PRIVILEGE lock one object and take
// no key; the others lock the object the key names.
const (
	DomainCluster        ResourceDomain = "CLUSTER"
	DomainDBName         ResourceDomain = "DB_NAME"
	DomainCollectionName ResourceDomain = "COLLECTION_NAME"
	DomainPrivilege      ResourceDomain = "PRIVILEGE"
	DomainSnapshotName   ResourceDomain = "SNAPSHOT_NAME"
	DomainImportJobID    ResourceDomain = "IMPORT_JOB_ID"
)

// ResourceDomains lists every domain, in the order error messages give them.
func ResourceDomains() []ResourceDomain {
	return []ResourceDomain{DomainCluster, DomainDBName, DomainCollectionName, DomainPrivilege, DomainSnapshotName, DomainImportJobID}
}

// ParseResourceDomain reads a domain name in any letter case.
func ParseResourceDomain(s string) (ResourceDomain, error) {
	d := ResourceDomain(strings.ToUpper(s))
	if !d.known() {
		return "", unknownDomain(s)
	}
	return d, nil
}

func (d ResourceDomain) known() bool {
	for _, k := range ResourceDomains() {
		if d == k {
			return true
		}
	}
	return false
}

// TakesKey reports whether a key of domain d names an object (DB_NAME and
// the like) rather than standing alone (CLUSTER, PRIVILEGE).
func (d ResourceDomain) TakesKey() bool { return d != DomainCluster && d != DomainPrivilege }

func unknownDomain(s string) error {
	names := make([]string, 0, 6)
	for _, d := range ResourceDomains() {
		names = append(names, string(d))
	}
	return invalid("unknown resource key domain %q (want one of %s)", s, strings.Join(names, ", "))
}

// ResourceKey is one lock a broadcast holds while it runs: shared or
// exclusive, on one object of a domain.
type ResourceKey struct {
	Domain ResourceDomain
	Key    string
	Shared bool
}

// ValidateResourceKeys checks at most MaxResourceKeys keys of known
// domains: CLUSTER and PRIVILEGE keys have no key text, the others 1..
// MaxResourceKeyBytes bytes. Duplicates are allowed (the broadcaster
// merges them).
func ValidateResourceKeys(keys []ResourceKey) error {
	if len(keys) > MaxResourceKeys {
		return invalid("%d resource keys (max %d)", len(keys), MaxResourceKeys)
	}
	for _, k := range keys {
		switch {
		case !k.Domain.known():
			return unknownDomain(string(k.Domain))
		case !k.Domain.TakesKey():
			if k.Key != "" {
				return invalid("resource key domain %s takes no key, got %q", k.Domain, k.Key)
			}
		case k.Key == "" || len(k.Key) > MaxResourceKeyBytes:
			return invalid("resource key %s needs a key of 1..%d bytes", k.Domain, MaxResourceKeyBytes)
		}
	}
	return nil
}
