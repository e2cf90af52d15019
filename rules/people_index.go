package rules

import (
	"hash/maphash"
	"unicode"
	"unicode/utf8"
)

// userIndex finds a directory's people by folded userid (foldID): an
// open-addressing table of their positions, each slot 8 bytes (the upper
// half of the folded userid's hash, the position plus one; 0 empty), at
// most two thirds full. A Go map from userid to person cost 54 MB at a
// million people, on every node; this is 16 MB, about as fast, and a
// repeat is found as the table is filled.
type userIndex struct {
	slots []uint64
	seed  maphash.Seed // the node's own: the table is never replicated
}

// indexUsers indexes people by folded userid. A userid that folds as an
// earlier one's is not indexed: repeat is the first such person in
// people's order and first the earlier one, with dup set, which is what
// reading the file in order would have met first.
func indexUsers(people []*Person) (ix userIndex, repeat, first int, dup bool) {
	if len(people) == 0 {
		return ix, 0, 0, false
	}
	size := 1 // never full, or an absent userid would probe forever
	for size <= len(people)+len(people)/2 {
		size <<= 1
	}
	ix = userIndex{slots: make([]uint64, size), seed: maphash.MakeSeed()}
	for i, p := range people {
		j, found := ix.probe(people, p.UserID)
		if found {
			if !dup {
				repeat, first, dup = i, j, true
			}
			continue
		}
		h := maphash.String(ix.seed, foldID(p.UserID))
		ix.slots[j] = h&^0xffffffff | uint64(i+1)
	}
	return ix, repeat, first, dup
}

// probe looks id up: the position of its person and true, or the slot it
// would take and false.
func (ix userIndex) probe(people []*Person, id string) (int, bool) {
	mask := uint64(len(ix.slots) - 1)
	h := maphash.String(ix.seed, foldID(id))
	tag := h &^ 0xffffffff
	for j := h & mask; ; j = (j + 1) & mask {
		s := ix.slots[j]
		if s == 0 {
			return int(j), false
		}
		if s&^0xffffffff == tag {
			if at := int(s&0xffffffff) - 1; cmpFold(people[at].UserID, id) == 0 {
				return at, true
			}
		}
	}
}

// find is the person whose userid folds as id does.
func (ix userIndex) find(people []*Person, id string) (*Person, bool) {
	if len(ix.slots) == 0 {
		return nil, false
	}
	if at, ok := ix.probe(people, id); ok {
		return people[at], true
	}
	return nil, false
}

// cmpFold compares a and b as foldID(a) and foldID(b) compare, without
// making them: strings.ToLower maps each rune through unicode.ToLower,
// and UTF-8's byte order is its runes' order.
func cmpFold(a, b string) int {
	for a != "" && b != "" {
		ca, cb := a[0], b[0]
		if ca < utf8.RuneSelf && cb < utf8.RuneSelf {
			if 'A' <= ca && ca <= 'Z' {
				ca += 'a' - 'A'
			}
			if 'A' <= cb && cb <= 'Z' {
				cb += 'a' - 'A'
			}
			if ca != cb {
				return int(ca) - int(cb)
			}
			a, b = a[1:], b[1:]
			continue
		}
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		ra, rb = unicode.ToLower(ra), unicode.ToLower(rb)
		if ra != rb {
			return int(ra) - int(rb)
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}
