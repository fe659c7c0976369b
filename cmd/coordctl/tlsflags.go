package main

import (
	"errors"
	"flag"
	"strings"

	"github.com/coordd/coordd/client"
)

// Environment mirrors of the TLS and token flags.
const (
	envCA        = "COORDD_TLS_CA"
	envCert      = "COORDD_TLS_CERT"
	envKey       = "COORDD_TLS_KEY"
	envToken     = "COORDD_TOKEN"
	envTokenFile = "COORDD_TOKEN_FILE"
)

// tlsFlags say how to reach a secure cluster: TLS is on when --tls-ca is given;
// a token (--token or --token-file) needs it.
type tlsFlags struct {
	ca, cert, key, serverName string
	token, tokenFile          string
}

func (t *tlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.ca, "tls-ca", t.ca, "CA certificate `file`: speak TLS, verifying servers against it (env "+envCA+")")
	fs.StringVar(&t.cert, "tls-cert", t.cert, "client certificate `file` for mutual TLS (env "+envCert+")")
	fs.StringVar(&t.key, "tls-key", t.key, "client key `file` for --tls-cert (env "+envKey+")")
	fs.StringVar(&t.serverName, "tls-server-name", t.serverName, "name to verify servers against (default server.coordd)")
	fs.StringVar(&t.token, "token", t.token, "bearer `token` (env "+envToken+"; prefer --token-file: a command line is visible to other users)")
	fs.StringVar(&t.tokenFile, "token-file", t.tokenFile, "`file` holding the bearer token (env "+envTokenFile+")")
}

func (t *tlsFlags) fromEnv(getenv func(string) string) {
	for _, e := range []struct {
		dst *string
		env string
	}{{&t.ca, envCA}, {&t.cert, envCert}, {&t.key, envKey}, {&t.token, envToken}, {&t.tokenFile, envTokenFile}} {
		if v := strings.TrimSpace(getenv(e.env)); v != "" {
			*e.dst = v
		}
	}
}

func (t *tlsFlags) check() error {
	if t.token != "" && t.tokenFile != "" {
		return errors.New("give --token or --token-file, not both")
	}
	if (t.token != "" || t.tokenFile != "") && t.ca == "" {
		return errors.New("a token needs TLS: give --tls-ca (the token would otherwise cross the network in clear text)")
	}
	if (t.cert != "" || t.key != "" || t.serverName != "") && t.ca == "" {
		return errors.New("--tls-cert, --tls-key and --tls-server-name need --tls-ca")
	}
	if (t.cert == "") != (t.key == "") {
		return errors.New("give --tls-cert and --tls-key together")
	}
	return nil
}

// apply loads the files into cfg (reading happens here, at run time, not
// while parsing).
func (t *tlsFlags) apply(cfg *client.Config) error {
	if t.ca == "" {
		return nil
	}
	tc, err := client.LoadTLS(client.TLSFiles{CA: t.ca, Cert: t.cert, Key: t.key, ServerName: t.serverName})
	if err != nil {
		return err
	}
	cfg.TLS, cfg.Token = tc, t.token
	if t.tokenFile != "" {
		if cfg.Token, err = client.ReadTokenFile(t.tokenFile); err != nil {
			return err
		}
	}
	return nil
}
