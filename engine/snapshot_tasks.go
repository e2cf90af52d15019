package engine

import (
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"unique"
	"unsafe"
)

// The section tasks_packed holds the pending tasks in their compact form
// (taskRec) as blocks of bytes, not one gob record each: gob reflects
// over every field of every record and allocates a Task, its times and
// its strings to write one and again to read one, which at ten million
// pending tasks was most of a snapshot's and a restore's time and a few
// gigabytes of garbage for the collector. A block is read into records
// directly, one allocation for a task's key and data and one for its
// record, and written from them with none.
//
// Only a snapshot of a cluster whose members all apply FSMPackedTasks
// holds it (packedTasks); the others hold every task in the section
// tasks, as before, so that a member still on an older build takes them.
// The tasks that are not compact (fired, cancelled, with an alert, an
// instant the compact form cannot hold) stay in tasks either way.

// taskBlock is one record of the section tasks_packed: up to
// taskBlockTasks tasks, in due order.
type taskBlock struct {
	// Rules are the rules the block's tasks name, each once, in the order
	// they first appear.
	Rules []string
	// Heads holds each task's fields as varints: the lengths of its key
	// and its data (0: none), its rule's index in Rules, then its due and
	// submitted instants as the compact form holds them (Unix nanoseconds
	// and a zone: packZoned).
	Heads []byte
	// Bytes holds each task's key, then its data, back to back: one
	// task's two are its record's kd.
	Bytes []byte
}

// A block ends at this many tasks, or once its Bytes pass
// taskBlockBytes: about a megabyte at most for gob to buffer at a time.
const (
	taskBlockTasks = 4096
	taskBlockBytes = 1 << 20
)

// FSMPackedTasks is the FSM version that first read the section
// tasks_packed.
const FSMPackedTasks uint16 = 6

// packedTasks says whether a snapshot of st writes its compact tasks to
// tasks_packed: every member applies FSMPackedTasks (a state with no
// member records is this build's own), and there is one to write, so
// that a state without pending tasks writes the snapshots it wrote
// before.
func packedTasks(st *state) bool {
	for _, m := range st.Members {
		if m.AppliesFSM() < FSMPackedTasks {
			return false
		}
	}
	found := false
	st.taskQueue.Ascend(func(it dueItem) bool {
		r := st.Tasks.record(it.id)
		found = r != nil && r.full == nil
		return !found
	})
	return found
}

// writeTasks writes the sections tasks_packed (when packed) and tasks,
// each in due order, then key: read off the task indexes once (a
// record is found by key in one of 4096 maps, most of a snapshot's time
// at ten million), or, if they and the tasks ever disagreed (never; but
// never lose a task over it), sorted from the map.
func writeTasks(enc *gob.Encoder, st *state, packed bool) error {
	tasks := slices.AppendSeq(make([]*taskRec, 0, st.Tasks.Len()), st.taskRecords())
	if len(tasks) != st.Tasks.Len() || slices.Contains(tasks, nil) {
		tasks = slices.SortedFunc(maps.Values(st.Tasks.m.toMap()), func(a, b *taskRec) int {
			return dueCmp(newDue(a.due(), a.key()), newDue(b.due(), b.key()))
		})
	}
	var full []*taskRec
	compact := 0
	for _, r := range tasks {
		if packed && r.full == nil {
			compact++
		} else {
			full = append(full, r)
		}
	}
	if packed {
		if err := writeTaskBlocks(enc, tasks, compact); err != nil {
			return err
		}
	}
	// Records, each made a Task as it is written: not every task made at
	// once beside the state.
	return writeSectionAs(enc, "tasks", full, (*taskRec).task)
}

// writeTaskBlocks writes the section tasks_packed: the count compact
// records of tasks, in blocks.
func writeTaskBlocks(enc *gob.Encoder, tasks []*taskRec, count int) error {
	const name = "tasks_packed"
	if err := enc.Encode(section{Name: name, Count: count}); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	var b taskBlock
	rules := map[unique.Handle[string]]uint64{}
	n := 0
	flush := func() error {
		if n == 0 {
			return nil
		}
		if err := enc.Encode(&b); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		b.Rules, b.Heads, b.Bytes, n = b.Rules[:0], b.Heads[:0], b.Bytes[:0], 0
		clear(rules)
		return nil
	}
	for _, r := range tasks {
		if r.full != nil {
			continue
		}
		ri, ok := rules[r.rule]
		if !ok {
			ri = uint64(len(b.Rules))
			rules[r.rule] = ri
			b.Rules = append(b.Rules, r.rule.Value())
		}
		b.Heads = binary.AppendUvarint(b.Heads, uint64(r.keyLen))
		b.Heads = binary.AppendUvarint(b.Heads, uint64(len(r.kd))-uint64(r.keyLen))
		b.Heads = binary.AppendUvarint(b.Heads, ri)
		b.Heads = binary.AppendVarint(b.Heads, r.dueAt)
		b.Heads = binary.AppendVarint(b.Heads, int64(r.dueZone))
		b.Heads = binary.AppendVarint(b.Heads, r.submittedAt)
		b.Heads = binary.AppendVarint(b.Heads, int64(r.submittedZone))
		b.Bytes = append(b.Bytes, r.kd...)
		if n++; n == taskBlockTasks || len(b.Bytes) >= taskBlockBytes {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// readTaskBlock reads one block of tasks_packed into st, of at most left
// tasks, and returns how many it held. Its tasks go into the queue as
// they are read: blocks come in due order, and a b-tree fills fastest in
// order.
//
// A block's records are made in one slice and their keys and data are
// substrings of one string over the block's bytes: two allocations a
// block, not two a task. At ten million tasks that is most of a restore's
// time saved, in allocating and in the collector's marking of twenty
// million small objects. The price is that a block's memory goes only
// when the last of its tasks does; its tasks are due together, so they
// mostly go together, and a node never holds more of them than the
// restore gave it.
//
// A check (checkTasks) keeps nothing, so it reads every block into
// scratch, emptied first (gob leaves a field the stream omits as it
// was), and makes no records: a leader checking a backup of ten million
// allocated a gigabyte and a half for the collector beside the state it
// serves, and peaked at 4.9 GiB.
func readTaskBlock(dec *gob.Decoder, st *state, left int, scratch *taskBlock) (int, error) {
	b := new(taskBlock)
	if scratch != nil {
		b = scratch
		*b = taskBlock{Rules: b.Rules[:0], Heads: b.Heads[:0], Bytes: b.Bytes[:0]}
	}
	if err := dec.Decode(b); err != nil {
		return 0, err
	}
	rules := make([]unique.Handle[string], len(b.Rules))
	for i, r := range b.Rules {
		rules[i] = unique.Make(r)
	}
	// Nothing writes b.Bytes after this but the next check's block: the
	// string may share them.
	all := unsafe.String(unsafe.SliceData(b.Bytes), len(b.Bytes))
	heads, at, n := b.Heads, 0, 0
	var recs []taskRec
	if !st.checkTasks {
		recs = make([]taskRec, 0, min(left, taskBlockTasks))
	}
	for ; len(heads) > 0; n++ {
		if n == left {
			return 0, fmt.Errorf("a block holds more tasks than the %d left of the section", left)
		}
		var f [7]int64
		for i := range f {
			var v int64
			var w int
			if i < 3 {
				var u uint64
				u, w = binary.Uvarint(heads)
				v = int64(u)
				if u > math.MaxInt32 {
					w = -1
				}
			} else {
				v, w = binary.Varint(heads)
				if i%2 == 0 && (v < math.MinInt32 || v > math.MaxInt32) { // a zone
					w = -1
				}
			}
			if w <= 0 {
				return 0, fmt.Errorf("task %d of the block: field %d does not read", n+1, i+1)
			}
			f[i] = v
			heads = heads[w:]
		}
		keyLen, dataLen, rule := f[0], f[1], f[2]
		// An empty key is read as it was written: Persist writes what the
		// state holds, and the reading refuses only what it cannot hold.
		switch {
		case rule >= int64(len(rules)):
			return 0, fmt.Errorf("task %d of the block names rule %d of %d", n+1, rule, len(rules))
		case keyLen+dataLen > int64(len(all)-at):
			return 0, fmt.Errorf("task %d of the block: its key and data run past the block", n+1)
		}
		if !st.checkTasks {
			recs = append(recs, taskRec{kd: all[at : at+int(keyLen+dataLen)], keyLen: uint32(keyLen), rule: rules[rule],
				dueAt: f[3], dueZone: int32(f[4]), submittedAt: f[5], submittedZone: int32(f[6])})
		}
		at += int(keyLen + dataLen)
	}
	if at < len(all) {
		return 0, errors.New("the block holds bytes past its last task")
	}
	if n == 0 {
		return 0, errors.New("an empty block")
	}
	if st.checkTasks {
		return n, nil
	}
	// Into the state only once the block has read whole (recs grows
	// until then, so no pointer into it is taken before).
	for i := range recs {
		r := &recs[i]
		k := r.key()
		st.Tasks.m.Set(k, r)
		st.taskQueue.ReplaceOrInsert(dueItem{r.dueAt, k})
	}
	return len(recs), nil
}
