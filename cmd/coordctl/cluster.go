package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/vocab"
)

var clusterGroup = &group{
	name:    "cluster",
	summary: "inspect and change the raft cluster",
	cmds: []*command{
		{name: "status", summary: "show the answering node's view: state, leader, term, indexes, members; exit 3 while it knows no leader", bind: bindStatus},
		{name: "members", args: "", summary: "list members (linearizable; --stale reads any node's replica)", bind: bindMembers},
		{name: "add-voter", args: "ID RAFT_ADDR", summary: "add (or re-add) a voter", bind: bindAddVoter},
		{name: "remove", args: "ID", summary: "remove a member from the configuration", bind: bindRemove},
		{name: "transfer-leader", args: "[ID]", summary: "hand leadership to ID, or to the most up-to-date voter", bind: bindTransfer},
	},
}

func bindStatus(*flag.FlagSet) func([]string) (action, error) {
	return func(args []string) (action, error) {
		if err := wantArgs(args, 0, 0, "no arguments"); err != nil {
			return action{}, err
		}
		return action{what: "cluster status", run: runStatus}, nil
	}
}

// runStatus shows the answering node's view; with no leader known it
// still shows it, then exits exitNoLeader, so "wait until cluster status
// succeeds" waits for a leader (docs/operations.md#readiness).
func runStatus(ctx context.Context, e *env) error {
	st, err := e.c.Status(ctx)
	if err != nil {
		return err
	}
	if err := showStatus(e, st); err != nil {
		return err
	}
	if st.GetLeaderId() == "" {
		return &exitError{code: exitNoLeader, msg: fmt.Sprintf("%s (%s, term %d) knows no leader: the cluster cannot take writes yet (exit %d; retry, or probe /readyz)",
			st.GetNodeId(), st.GetState(), st.GetTerm(), exitNoLeader)}
	}
	return nil
}

func showStatus(e *env, st *coordpb.StatusResponse) error {
	return e.show(statusJSON{
		NodeID: st.GetNodeId(), State: st.GetState(), LeaderID: st.GetLeaderId(),
		LeaderGRPCAddr: st.GetLeaderGrpcAddr(), Term: st.GetTerm(),
		CommitIndex: st.GetCommitIndex(), AppliedIndex: st.GetAppliedIndex(),
		LastLogIndex: st.GetLastLogIndex(), LastSnapshotIndex: st.GetLastSnapshotIndex(),
		EstablishedTerm: st.GetEstablishedTerm(), Members: toMembersJSON(st.GetMembers()),
	}, func(w io.Writer) error {
		leader := "none known"
		if st.GetLeaderId() != "" {
			leader = st.GetLeaderId() + " at " + dash(st.GetLeaderGrpcAddr())
		}
		tw := newTable(w)
		fmt.Fprintf(tw, "Node:\t%s (%s)\n", st.GetNodeId(), st.GetState())
		fmt.Fprintf(tw, "Leader:\t%s\n", leader)
		fmt.Fprintf(tw, "Term:\t%d\n", st.GetTerm())
		fmt.Fprintf(tw, "Established term:\t%d\n", st.GetEstablishedTerm())
		fmt.Fprintf(tw, "Commit index:\t%d\n", st.GetCommitIndex())
		fmt.Fprintf(tw, "Applied index:\t%d\n", st.GetAppliedIndex())
		fmt.Fprintf(tw, "Last log index:\t%d\n", st.GetLastLogIndex())
		fmt.Fprintf(tw, "Last snapshot index:\t%d\n", st.GetLastSnapshotIndex())
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
		return writeMembersTable(w, st.GetMembers())
	})
}

func bindMembers(fs *flag.FlagSet) func([]string) (action, error) {
	stale := fs.Bool("stale", false, "serve from the answering node's replica instead of the leader")
	return func(args []string) (action, error) {
		if err := wantArgs(args, 0, 0, "no arguments"); err != nil {
			return action{}, err
		}
		consistency := coordpb.ReadConsistency_LINEARIZABLE
		if *stale {
			consistency = coordpb.ReadConsistency_STALE
		}
		return action{what: "cluster members", run: func(ctx context.Context, e *env) error {
			ms, err := e.c.Members(ctx, consistency)
			if err != nil {
				return err
			}
			return printMembers(e, ms)
		}}, nil
	}
}

func printMembers(e *env, ms []*coordpb.Member) error {
	return e.show(membersJSON{Members: toMembersJSON(ms)}, func(w io.Writer) error { return writeMembersTable(w, ms) })
}

func bindAddVoter(fs *flag.FlagSet) func([]string) (action, error) {
	grpcAddr := fs.String("grpc-addr", "", "the member's client gRPC `address`")
	httpAddr := fs.String("http-addr", "", "the member's HTTP `address`")
	return func(args []string) (action, error) {
		if err := wantArgs(args, 2, 2, "ID RAFT_ADDR"); err != nil {
			return action{}, err
		}
		m := client.MemberSpec{ID: args[0], RaftAddr: args[1], GRPCAddr: *grpcAddr, HTTPAddr: *httpAddr}
		if err := checkMemberID(m.ID); err != nil {
			return action{}, err
		}
		for _, a := range []struct {
			field, v string
			required bool
		}{{"RAFT_ADDR", m.RaftAddr, true}, {"--grpc-addr", m.GRPCAddr, false}, {"--http-addr", m.HTTPAddr, false}} {
			if err := trimInvalid(vocab.ValidateAddr(a.field, a.v, a.required)); err != nil {
				return action{}, err
			}
		}
		return action{what: "add voter " + m.ID, mutates: true, run: func(ctx context.Context, e *env) error {
			ms, err := e.c.AddVoter(ctx, m)
			if err != nil {
				return err
			}
			if !e.json {
				fmt.Fprintf(e.out, "Added voter %s (raft %s).\n\n", m.ID, m.RaftAddr)
			}
			return printMembers(e, ms)
		}}, nil
	}
}

func bindRemove(*flag.FlagSet) func([]string) (action, error) {
	return func(args []string) (action, error) {
		if err := wantArgs(args, 1, 1, "ID"); err != nil {
			return action{}, err
		}
		id := args[0]
		if err := checkMemberID(id); err != nil {
			return action{}, err
		}
		return action{what: "remove member " + id, mutates: true, run: func(ctx context.Context, e *env) error {
			ms, err := e.c.RemoveMember(ctx, id)
			if err != nil {
				return err
			}
			if !e.json {
				fmt.Fprintf(e.out, "Removed member %s.\n\n", id)
			}
			return printMembers(e, ms)
		}}, nil
	}
}

func bindTransfer(*flag.FlagSet) func([]string) (action, error) {
	return func(args []string) (action, error) {
		if err := wantArgs(args, 0, 1, "at most one ID"); err != nil {
			return action{}, err
		}
		target := ""
		if len(args) == 1 {
			target = args[0]
			if err := checkMemberID(target); err != nil {
				return action{}, err
			}
		}
		return action{what: "transfer leadership", mutates: true, run: func(ctx context.Context, e *env) error {
			resp, err := e.c.TransferLeader(ctx, target)
			if err != nil {
				return err
			}
			return e.show(transferJSON{LeaderID: resp.GetLeaderId(), Term: resp.GetTerm()}, func(w io.Writer) error {
				if resp.GetLeaderId() == "" {
					_, err := fmt.Fprintf(w, "Leadership transferred (term %d); the new leader is not known yet (see 'coordctl cluster status').\n", resp.GetTerm())
					return err
				}
				_, err := fmt.Fprintf(w, "Leadership transferred to %s (term %d).\n", resp.GetLeaderId(), resp.GetTerm())
				return err
			})
		}}, nil
	}
}

func checkMemberID(id string) error {
	return trimInvalid(vocab.ValidateMemberID(id))
}

// trimInvalid drops the "invalid command: " prefix of commands' shape errors,
// which means nothing to an operator.
func trimInvalid(err error) error {
	if err == nil {
		return nil
	}
	return errors.New(strings.TrimPrefix(err.Error(), commands.ErrInvalid.Error()+": "))
}
