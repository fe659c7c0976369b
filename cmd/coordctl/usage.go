package main

import (
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
)

const globalFlagsHelp = `Global flags (accepted before or after any command):
  --endpoints host:port,...  gRPC endpoints, tried in order; env COORDD_ENDPOINTS
                             (default 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003)
  -o, --output table|json    output format (default table)
  --timeout DURATION         bound on each request, retries included (default 5s);
                             one attempt gets half of it, one dial 1s. 'insert'
                             waits --timeout plus 1s per 1,000 rows; 'flush --wait'
                             polls with --timeout each, up to --wait-timeout;
                             'snapshot save' bounds each chunk's wait, not the
                             transfer; 'assignment watch' streams until
                             --count/--duration
  --tls-ca FILE              speak TLS, verifying servers against this CA; env COORDD_TLS_CA
  --tls-cert FILE --tls-key FILE
                             client certificate for mutual TLS; env COORDD_TLS_CERT, COORDD_TLS_KEY
  --tls-server-name NAME     name to verify servers against (default server.coordd)
  --token-file FILE          bearer token (needs TLS); env COORDD_TOKEN_FILE
  --token TOKEN              the same inline (visible to other users); env COORDD_TOKEN
`

func mainUsage() string {
	var b strings.Builder
	b.WriteString(`coordctl: operator CLI for coordd

Usage:
  coordctl [global flags] GROUP COMMAND [flags] [args]
  coordctl help [GROUP [COMMAND]]
  coordctl GROUP --help

Commands:
`)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, g := range groups {
		for _, c := range g.cmds {
			fmt.Fprintf(tw, "  %s\t%s\n", strings.Join(strings.Fields(g.name+" "+c.name+" "+c.args), " "), c.summary)
		}
	}
	for _, c := range localCommands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.usage, c.summary)
	}
	fmt.Fprintf(tw, "  help [GROUP [COMMAND]]\t%s\n", "show this text, or a group's or a command's")
	tw.Flush()
	b.WriteString("\n" + globalFlagsHelp)
	b.WriteString(`
Exit status: 0 success; 1 the request failed (the server's error is printed);
2 bad usage (nothing was sent); 3 'cluster status' answered but knows no
leader (the cluster cannot take writes yet).
`)
	return b.String()
}

func groupUsage(g *group) string {
	var b strings.Builder
	fmt.Fprintf(&b, "coordctl %s: %s\n\nUsage:\n  coordctl %s COMMAND [flags] [args]\n\nCommands:\n", g.name, g.summary, g.name)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, c := range g.cmds {
		fmt.Fprintf(tw, "  %s %s\t%s\n", c.name, c.args, c.summary)
	}
	tw.Flush()
	fmt.Fprintf(&b, "\nRun 'coordctl %s COMMAND --help' for a command's flags.\n\n%s", g.name, globalFlagsHelp)
	return b.String()
}

func commandUsage(g *group, c *command, fs *flag.FlagSet) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s\n\n%s\n", strings.Join(strings.Fields("coordctl "+g.name+" "+c.name+" [flags] "+c.args), " "), c.summary)
	if c.notes != "" {
		fmt.Fprintf(&b, "\n%s\n", strings.TrimSpace(c.notes))
	}
	var own []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		switch f.Name {
		case "endpoints", "o", "output", "timeout", "tls-ca", "tls-cert", "tls-key", "tls-server-name", "token", "token-file":
		default:
			own = append(own, f)
		}
	})
	if len(own) > 0 {
		b.WriteString("\nFlags:\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, f := range own {
			arg, usage := flag.UnquoteUsage(f)
			fmt.Fprintf(tw, "  --%s %s\t%s\n", f.Name, arg, usage)
		}
		tw.Flush()
	}
	b.WriteString("\n" + globalFlagsHelp)
	return b.String()
}
