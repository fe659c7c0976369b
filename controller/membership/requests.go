package membership

import (
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// The checked requests; a constructor's error matches commands.ErrInvalid.
// The zero value of a request is not valid.

// Join is a member to add as a voter.
type Join struct {
	upsert       commands.Command
	id, raftAddr string
	clusterID    string // the joiner's cluster, "" when its data dir never joined one
	joining      bool   // the joiner says it is joining (not restarting)
}

// NewJoin checks an AddVoter request.
func NewJoin(req *coordpb.AddVoterRequest) (Join, error) {
	c, err := upsertMember(req.Id, req.RaftAddr, req.GrpcAddr, req.HttpAddr)
	return Join{upsert: c, id: req.Id, raftAddr: req.RaftAddr, clusterID: req.ClusterId, joining: req.Joining}, err
}

// Registration is a member's own record of its client-facing addresses.
type Registration struct {
	upsert       commands.Command
	id, raftAddr string
}

// NewRegistration checks a RegisterMember request.
func NewRegistration(req *coordpb.RegisterMemberRequest) (Registration, error) {
	c, err := upsertMember(req.Id, req.RaftAddr, req.GrpcAddr, req.HttpAddr)
	return Registration{upsert: c, id: req.Id, raftAddr: req.RaftAddr}, err
}

func upsertMember(id, raftAddr, grpcAddr, httpAddr string) (commands.Command, error) {
	return commands.New(&logpb.UpsertMember{Member: &logpb.Member{Id: id, RaftAddr: raftAddr, GrpcAddr: grpcAddr, HttpAddr: httpAddr}}, "")
}

// Removal is a member to remove.
type Removal struct {
	remove commands.Command
	id     string
}

// NewRemoval checks a RemoveMember request.
func NewRemoval(req *coordpb.RemoveMemberRequest) (Removal, error) {
	c, err := commands.New(&logpb.RemoveMember{Id: req.Id}, "")
	return Removal{remove: c, id: req.Id}, err
}

// Transfer names the voter to hand leadership to ("" for any).
type Transfer struct{ target string }

// NewTransfer checks a TransferLeader request.
func NewTransfer(req *coordpb.TransferLeaderRequest) (Transfer, error) {
	if req.TargetId != "" {
		if err := vocab.ValidateMemberID(req.TargetId); err != nil {
			return Transfer{}, vocab.Errorf(commands.ErrInvalid, "%w", err)
		}
	}
	return Transfer{target: req.TargetId}, nil
}
