package screen

import "hash/maphash"

// idTable maps ids to their entries. It is an open-addressing hash table
// with linear probing that keeps each id's hash beside its entry, so that
// growing the table moves slots without hashing an id again or reading the
// entry: a stream names thousands of ids, and regrowing a built-in map to
// hold them cost more than putting them in. Callers that look an id up and
// then add it hash it once, with hash, and pass the hash to lookup and add.
type idTable struct {
	seed   maphash.Seed
	seeded bool
	slots  []idSlot // empty, or a power of two long
	n      int      // slots in use
}

type idSlot struct {
	hash uint64
	e    *entry // nil for a free slot
}

// firstIDSlots is the size of a table's first allocation.
const firstIDSlots = 16

// hash returns the hash of id in this table.
func (t *idTable) hash(id string) uint64 {
	if !t.seeded {
		t.seed, t.seeded = maphash.MakeSeed(), true
	}
	return maphash.String(t.seed, id)
}

// get returns the entry for id, or nil.
func (t *idTable) get(id string) *entry {
	if t.n == 0 {
		return nil
	}
	return t.lookup(id, t.hash(id))
}

// lookup returns the entry for id, whose hash is h, or nil.
func (t *idTable) lookup(id string, h uint64) *entry {
	if t.n == 0 {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.e == nil {
			return nil
		}
		if s.hash == h && s.e.id == id {
			return s.e
		}
	}
}

// add adds e, whose id the table doesn't hold and hashes to h.
func (t *idTable) add(e *entry, h uint64) {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	t.insert(h, e)
	t.n++
}

func (t *idTable) insert(h uint64, e *entry) {
	mask := uint64(len(t.slots) - 1)
	i := h & mask
	for t.slots[i].e != nil {
		i = (i + 1) & mask
	}
	t.slots[i] = idSlot{hash: h, e: e}
}

// grow doubles the table, keeping what it holds.
func (t *idTable) grow() {
	old := t.slots
	t.slots = make([]idSlot, max(firstIDSlots, 2*len(old)))
	for _, s := range old {
		if s.e != nil {
			t.insert(s.hash, s.e)
		}
	}
}

// firstDuplicate returns the first of ids equal to an earlier one; hashes
// holds their hashes, in order. slots is scratch space, returned for the
// next call, all zero.
func firstDuplicate(ids []string, hashes []uint64, slots []int32) (string, bool, []int32) {
	if len(ids) <= 16 {
		// Comparing every pair beats filling a table for short lists.
		for i, c := range ids {
			for _, d := range ids[:i] {
				if d == c {
					return c, true, slots
				}
			}
		}
		return "", false, slots
	}
	size := firstIDSlots
	for size < 2*len(ids) {
		size *= 2
	}
	if cap(slots) < size {
		slots = make([]int32, size)
	}
	slots = slots[:size]
	defer clear(slots)
	mask := uint64(size - 1)
	for i, c := range ids {
		h := hashes[i]
		j := h & mask
		for ; slots[j] != 0; j = (j + 1) & mask {
			if k := slots[j] - 1; hashes[k] == h && ids[k] == c {
				return c, true, slots
			}
		}
		slots[j] = int32(i + 1)
	}
	return "", false, slots
}
