package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/stretchr/testify/require"

	"github.com/heraldhq/herald/cluster"
)

// TestClusterCompact: a raft.db whose log was mostly truncated (as Raft
// does after a snapshot) keeps its size until `herald cluster compact`,
// which shrinks it, keeps every entry and key left, prints both sizes, and
// refuses while a node holds the file.
func TestClusterCompact(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "raft.db")
	store, err := raftboltdb.NewBoltStore(path)
	require.NoError(t, err)
	payload := bytes.Repeat([]byte("x"), 8<<10)
	var logs []*raft.Log
	for i := uint64(1); i <= 2000; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: payload})
	}
	require.NoError(t, store.StoreLogs(logs))
	require.NoError(t, store.DeleteRange(1, 1990))
	require.NoError(t, store.Set([]byte("cluster_id"), []byte("c-1")))

	_, err = runHerald(t, "cluster", "compact", "--data-dir", dir)
	require.True(t, errors.Is(err, cluster.ErrDataDirInUse), "refused while held: %v", err)
	require.ErrorContains(t, err, "stop its agent first")
	require.NoError(t, store.Close())

	before, err := os.Stat(path)
	require.NoError(t, err)
	out, err := runHerald(t, "cluster", "compact", "--data-dir", dir)
	require.NoError(t, err)
	after, err := os.Stat(path)
	require.NoError(t, err)
	require.Less(t, after.Size()*10, before.Size(), "compacted to a tenth or less")
	require.Equal(t, path+": "+showBytes(before.Size())+" before, "+showBytes(after.Size())+" after\n", out)
	_, err = os.Stat(path + ".compact")
	require.True(t, os.IsNotExist(err), "no temporary file left")

	store, err = raftboltdb.NewBoltStore(path)
	require.NoError(t, err)
	defer store.Close()
	first, err := store.FirstIndex()
	require.NoError(t, err)
	last, err := store.LastIndex()
	require.NoError(t, err)
	require.Equal(t, [2]uint64{1991, 2000}, [2]uint64{first, last})
	var l raft.Log
	require.NoError(t, store.GetLog(1995, &l))
	require.Equal(t, payload, l.Data)
	id, err := store.Get([]byte("cluster_id"))
	require.NoError(t, err)
	require.Equal(t, "c-1", string(id))
}
