package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"github.com/coordd/coordd/binlog"
	"github.com/coordd/coordd/objectstore"
)

var binlogGroup = &group{name: "binlog", summary: "read binlog objects from the object store", cmds: []*command{
	{name: "dump", args: "--object-store URL PATH...", summary: "print the rows of insert binlog objects as JSON lines {\"pk\",\"ts\"} (paths as 'segment get' lists them) from the streaming nodes' object store", bind: bindBinlogDump},
}}

// bindBinlogDump: --object-store is required. coordd does not know where
// the streaming nodes write binlogs (their own --object-store), so there
// is no store to ask it for, and a default path would silently read
// another cluster's objects under the same keys (review D1).
func bindBinlogDump(fs *flag.FlagSet) func([]string) (action, error) {
	store := fs.String("object-store", "", "the streaming nodes' object store `URL` (file:///DIR, a directory, or s3://BUCKET?endpoint=...&use_path_style=true); required: 'coordd dev' prints its own")
	return func(args []string) (action, error) {
		if len(args) == 0 {
			return action{}, fmt.Errorf("want at least one PATH")
		}
		for _, p := range args {
			if _, err := binlog.ParsePath(p); err != nil {
				return action{}, fmt.Errorf("PATH %q: want insert_log/<collection>/<partition>/<segment>/<field>/<log_id>", p)
			}
		}
		if *store == "" {
			return action{}, fmt.Errorf("--object-store is required: the object store the streaming nodes write binlogs to (their --object-store; 'coordd dev' prints its own, ./data/dev/objects for 'make run')")
		}
		url, paths := *store, args
		return action{what: "binlog dump", run: func(ctx context.Context, e *env) error {
			s, err := objectstore.Open(ctx, url)
			if err != nil {
				return err
			}
			defer s.Close()
			w := bufio.NewWriter(e.out)
			defer w.Flush()
			enc := json.NewEncoder(w)
			for _, p := range paths {
				data, err := s.Get(ctx, p)
				if err != nil {
					return err
				}
				obj, err := binlog.Decode(data)
				if err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
				if id, _ := binlog.ParsePath(p); obj.ID != id {
					return fmt.Errorf("%s: the object says it is %s", p, obj.ID.Path())
				}
				for _, r := range obj.Rows {
					if err := enc.Encode(r); err != nil {
						return err
					}
				}
			}
			return nil
		}}, nil
	}
}
