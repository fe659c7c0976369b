// Command coordd is the coordd server.
//
//	coordd [serve] --id ID --data-dir DIR --raft-addr A --grpc-addr A --http-addr A (--peers ... | --join A)
//	coordd dev [--data-dir ./data/dev] [--secure]   a three-node cluster on loopback, in the foreground
//	coordd token generate                  print a fresh token for --bootstrap-token-file
//	coordd restore --snapshot FILE --data-dir DIR --id ID --raft-addr A --id-floor N [--ts-floor-ms MS [--yes]]   seed a new cluster from a backup
//	coordd inspect --data-dir DIR          what a stopped member's data dir holds
//	coordd recover --data-dir DIR --peers-file FILE   rewrite a stopped member's configuration (quorum loss)
//
// Every flag has an environment equivalent (COORDD_ plus the flag name in
// upper snake case) and may be set in a JSON config file (--config) keyed by
// flag name. A flag on the command line wins over the environment, which
// wins over the config file.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/coordd/coordd/cmd/internal/buildinfo"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version" || args[0] == "version") {
		fmt.Fprint(stdout, versionText("coordd"))
		return 0
	}
	cmd := "serve"
	if len(args) > 0 && (args[0] == "serve" || args[0] == "dev" || args[0] == "token" || offline[args[0]] || args[0] == "help" || args[0] == "-h" || args[0] == "--help") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		var cfg serveConfig
		if cfg, err = parseServeFlags(args, os.Getenv, stderr); err == nil {
			err = serve(ctx, cfg, stderr)
		}
	case "token":
		if len(args) != 1 || args[0] != "generate" {
			fmt.Fprintln(stderr, "usage: coordd token generate")
			return 2
		}
		var tok string
		if tok, err = generateToken(); err == nil {
			fmt.Fprintln(stdout, tok)
		}
	case "dev":
		var cfg devConfig
		if cfg, err = parseDevFlags(args, stderr); err == nil {
			err = dev(ctx, cfg, stdout, stderr)
		}
	case "restore":
		err = restoreCmd(args, stdout, stderr)
	case "inspect":
		err = inspectCmd(args, stdout, stderr)
	case "recover":
		err = recoverCmd(args, stdout, stderr)
	default:
		fmt.Fprintln(stdout, usage)
		return 0
	}
	if err == errHelp {
		return 0
	}
	if err == errUsage {
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "coordd: %v\n", err)
		if _, ok := err.(configError); ok {
			return 2
		}
		return 1
	}
	return 0
}

const usage = `coordd — a Raft-replicated coordinator for streaming vector databases

usage:
  coordd [serve] [flags]   run one member (see 'coordd serve -h')
  coordd dev [flags]       run a local three-node cluster on loopback (see 'coordd dev -h')
  coordd restore [flags]   seed a new cluster's first member from a backup (see 'coordd restore -h')
  coordd inspect [flags]   show what a stopped member's data dir holds (see 'coordd inspect -h')
  coordd recover [flags]   rewrite a stopped member's configuration after quorum loss (see 'coordd recover -h')
  coordd token generate    print a fresh admin token for --bootstrap-token-file
  coordd --version         build and log-format version

coordd serve is secure by default (TLS, mutual TLS on raft, tokens): give
--tls-ca/--tls-cert/--tls-key, or --insecure for plaintext without
authentication (development only). See docs/security.md.`

// offline names the subcommands that work on a stopped member's data dir.
var offline = map[string]bool{"restore": true, "inspect": true, "recover": true}

// versionText is `coordd --version`.
func versionText(program string) string { return buildinfo.Text(program) }
