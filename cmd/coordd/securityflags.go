package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/coordd/coordd/api/auth"
	"github.com/coordd/coordd/security"
)

// securityFlags choose between a secure member (TLS on every port, mutual
// TLS with the server identity on raft, token authentication: the default)
// and an explicitly insecure one (plaintext, no authentication) for local
// development and tests (docs/security.md).
type securityFlags struct {
	Insecure           bool
	CA, Cert, Key      string
	BootstrapTokenFile string
}

func (s *securityFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&s.Insecure, "insecure", false,
		"serve plaintext without authentication on every port: anyone who can reach a port controls the cluster (development and tests only)")
	fs.StringVar(&s.CA, "tls-ca", "", "CA certificate file: verifies peers and clients")
	fs.StringVar(&s.Cert, "tls-cert", "", "this member's server certificate (must carry URI SAN "+security.ServerURI+")")
	fs.StringVar(&s.Key, "tls-key", "", "key of --tls-cert")
	fs.StringVar(&s.BootstrapTokenFile, "bootstrap-token-file", "",
		"file holding the admin token the first leader installs once per cluster (coordd token generate makes one)")
}

func (s securityFlags) validate() error {
	given := s.CA != "" || s.Cert != "" || s.Key != "" || s.BootstrapTokenFile != ""
	if s.Insecure {
		if given {
			return badConfig("--insecure cannot be combined with --tls-ca, --tls-cert, --tls-key or --bootstrap-token-file")
		}
		return nil
	}
	if s.CA == "" || s.Cert == "" || s.Key == "" {
		return badConfig("coordd is secure by default: give --tls-ca, --tls-cert and --tls-key " +
			"(and --bootstrap-token-file when bootstrapping a cluster), or --insecure for a plaintext cluster " +
			"without authentication (development only; see docs/security.md)")
	}
	return nil
}

// secureSetup is the loaded TLS material and bootstrap token of a secure
// member; nil for --insecure.
type secureSetup struct {
	tls       *security.Material
	bootstrap *auth.Token
}

// load reads the files; configuration errors exit with status 2.
func (s securityFlags) load() (*secureSetup, error) {
	if s.Insecure {
		return nil, nil
	}
	m, err := security.LoadServer(security.Files{CA: s.CA, Cert: s.Cert, Key: s.Key})
	if err != nil {
		return nil, badConfig("TLS: %v", err)
	}
	out := &secureSetup{tls: m}
	if s.BootstrapTokenFile != "" {
		b, err := os.ReadFile(s.BootstrapTokenFile)
		if err != nil {
			return nil, badConfig("--bootstrap-token-file: %v", err)
		}
		tok, err := auth.ParseToken(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, badConfig("--bootstrap-token-file %s: %v", s.BootstrapTokenFile, err)
		}
		out.bootstrap = &tok
	}
	return out, nil
}

// generateToken prints a fresh token for --bootstrap-token-file
// (`coordd token generate`); the cluster learns it only when a leader
// installs it.
func generateToken() (string, error) {
	t, err := auth.NewToken()
	if err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	return t.String(), nil
}
