package streamingnode

import (
	"context"
	"testing"

	"github.com/coordd/coordd/api/coordpb"
)

// benchmarkInsert: one op is one StreamingNodeService.Insert of rows rows
// (contiguous primary keys, as client.Insert sends them) through gRPC to a
// node holding the PChannel, against the in-process fake coordd: segment
// allocation, a timestamp, the DML encoding and an fsync'd WAL append.
// B/op and allocs/op are the figures of interest (the fsync dominates the
// time); they include both ends of the gRPC call.
func benchmarkInsert(b *testing.B, rows int) {
	f := startFakeCoord(b)
	n := startNode(b, f, b.TempDir(), nil)
	if err := n.assign(b, pch, 2, 3); err != nil {
		b.Fatal(err)
	}
	id, epoch := n.Session()
	pks := make([]int64, rows)
	req := &coordpb.InsertRequest{Vchannel: vch, Term: 2, CollectionId: 100, PartitionId: 7, Pks: pks, NodeId: id, Epoch: epoch}
	next := int64(1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range pks {
			pks[j] = next
			next++
		}
		if _, err := n.cl.Insert(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows), "rows/op")
}

func BenchmarkInsert100(b *testing.B)   { benchmarkInsert(b, 100) }
func BenchmarkInsert10000(b *testing.B) { benchmarkInsert(b, 10_000) }
