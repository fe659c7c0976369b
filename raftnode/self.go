package raftnode

// Self is a member's identity and the addresses it serves on: what it
// registers in the FSM's member table so that others can find and forward
// to it. The API server and the membership procedures (cluster) share it.
type Self struct {
	ID       string
	RaftAddr string
	GRPCAddr string
	HTTPAddr string
}
