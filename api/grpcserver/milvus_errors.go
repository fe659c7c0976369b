package grpcserver

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/milvuspb"
	"github.com/coordd/coordd/controller/broadcaster"
)

// Refusals on the Milvus surface (docs/milvus.md#errors). A Milvus client
// branches on the StreamingError it finds in the details of the gRPC
// status, so every refusal coordd classifies carries one, under the gRPC
// code Milvus's own StreamingCoord pairs with it (FailedPrecondition for
// the channel, term and resource refusals, InvalidArgument for bad input,
// Internal for INNER). Answers that a client retries as they are —
// Unavailable (no leader, an unknown outcome), the caller's deadline,
// PermissionDenied and Unauthenticated — keep coordd's code, metadata and
// message, so the same retry rules as for coordd's own API apply.

// milvusError is a refusal the Milvus adapter decided itself.
type milvusError struct {
	code  milvuspb.StreamingCode
	cause string
}

func (e *milvusError) Error() string { return e.code.String() + ": " + e.cause }

func milvusRefusal(code milvuspb.StreamingCode, format string, a ...any) error {
	return &milvusError{code: code, cause: fmt.Sprintf(format, a...)}
}

// grpcCodeOfStreaming is the gRPC code each StreamingCode travels under.
func grpcCodeOfStreaming(c milvuspb.StreamingCode) codes.Code {
	switch c {
	case milvuspb.StreamingCode_STREAMING_CODE_OK:
		return codes.OK
	case milvuspb.StreamingCode_STREAMING_CODE_INNER:
		return codes.Internal
	case milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT:
		return codes.InvalidArgument
	case milvuspb.StreamingCode_STREAMING_CODE_UNKNOWN:
		return codes.Unknown
	}
	return codes.FailedPrecondition
}

// streamingStatus is the status of a StreamingError: its gRPC code, the
// cause as message and the error in the details.
func streamingStatus(c milvuspb.StreamingCode, cause string) error {
	st, err := status.New(grpcCodeOfStreaming(c), cause).WithDetails(&milvuspb.StreamingError{Code: c, Cause: cause})
	if err != nil {
		return status.Error(grpcCodeOfStreaming(c), cause)
	}
	return st.Err()
}

// streamingCodeOf is the StreamingCode of a coordd status code; ok=false
// for the codes that stay coordd's (see above).
func streamingCodeOf(c codes.Code) (milvuspb.StreamingCode, bool) {
	switch c {
	case codes.InvalidArgument, codes.OutOfRange:
		return milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT, true
	case codes.NotFound:
		return milvuspb.StreamingCode_STREAMING_CODE_CHANNEL_NOT_EXIST, true
	case codes.FailedPrecondition, codes.Aborted, codes.AlreadyExists:
		// Refusals on the state: a secondary cluster (replication), a
		// conflicting collection, a fenced owner.
		return milvuspb.StreamingCode_STREAMING_CODE_IGNORED_OPERATION, true
	case codes.ResourceExhausted:
		return milvuspb.StreamingCode_STREAMING_CODE_RESOURCE_ACQUIRED, true
	case codes.Internal, codes.DataLoss:
		return milvuspb.StreamingCode_STREAMING_CODE_INNER, true
	}
	return 0, false
}

// toMilvusStatus turns an error of a handler into the status a Milvus
// client reads: a milvusError as it is; a resource key that could not be
// had as RESOURCE_ACQUIRED; a secondary cluster's refusal as
// REPLICATE_VIOLATION; everything else through coordd's own error table
// (toStatus) and then streamingCodeOf.
func (s *Server) toMilvusStatus(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var me *milvusError
	var lt *broadcaster.LockTimeoutError
	switch {
	case errors.As(err, &me):
		return streamingStatus(me.code, me.cause)
	case errors.As(err, &lt):
		return streamingStatus(milvuspb.StreamingCode_STREAMING_CODE_RESOURCE_ACQUIRED, err.Error())
	case errors.Is(err, broadcaster.ErrNotPrimary):
		return streamingStatus(milvuspb.StreamingCode_STREAMING_CODE_REPLICATE_VIOLATION, err.Error())
	}
	se := s.toStatus(ctx, err)
	st, _ := status.FromError(se)
	if hasStreamingDetail(st) {
		return se // a forwarded answer that is already Milvus's
	}
	c, ok := streamingCodeOf(st.Code())
	if !ok {
		return se
	}
	return streamingStatus(c, st.Message())
}

func hasStreamingDetail(st *status.Status) bool {
	for _, d := range st.Details() {
		if _, ok := d.(*milvuspb.StreamingError); ok {
			return true
		}
	}
	return false
}
