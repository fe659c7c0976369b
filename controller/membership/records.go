package membership

import "github.com/coordd/coordd/commands/logpb"

// Records remembers the directory records of some members by identity
// (*fsm.State is immutable and keeps an unchanged record's pointer from one
// state to the next), so a cache built from them can tell cheaply whether
// any changed. The zero value remembers none.
type Records struct{ recs []*logpb.Member }

// RecordsOf remembers the records dir holds for the n members id names
// (a missing one is remembered as missing).
func RecordsOf(dir Directory, n int, id func(i int) string) Records {
	r := Records{recs: make([]*logpb.Member, n)}
	for i := range n {
		r.recs[i], _ = dir.Member(id(i))
	}
	return r
}

// Unchanged reports whether dir holds exactly the remembered records for
// the n members id names, in that order.
func (r Records) Unchanged(dir Directory, n int, id func(i int) string) bool {
	if n != len(r.recs) {
		return false
	}
	for i := range n {
		if rec, _ := dir.Member(id(i)); rec != r.recs[i] {
			return false
		}
	}
	return true
}
