package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// pinnedCommands is every command number as written in the replicated log.
// The numbers are there forever: a change here is a change of the log
// format, which no build may make.
var pinnedCommands = []struct {
	name string
	t    CommandType
	n    uint8
}{
	{"CmdStartRun", CmdStartRun, 1},
	{"CmdAddDeliveries", CmdAddDeliveries, 2},
	{"CmdClaim", CmdClaim, 3},
	{"CmdRecordResults", CmdRecordResults, 4},
	{"CmdUpsertMember", CmdUpsertMember, 5},
	{"CmdRemoveMember", CmdRemoveMember, 6},
	{"CmdInitCursor", CmdInitCursor, 7},
	{"CmdFinishPlan", CmdFinishPlan, 8},
	{"CmdExpire", CmdExpire, 9},
	{"CmdRaiseAlert", CmdRaiseAlert, 10},
	{"CmdAckAlert", CmdAckAlert, 11},
	{"CmdSubmitTask", CmdSubmitTask, 12},
	{"CmdCancelTask", CmdCancelTask, 13},
	{"CmdNotifyAlert", CmdNotifyAlert, 14},
	{"CmdCompensated", CmdCompensated, 15},
	{"CmdPrune", CmdPrune, 16},
	{"CmdRecordAudit", CmdRecordAudit, 18},
	{"CmdPruneAudit", CmdPruneAudit, 19},
	{"CmdPauseRule", CmdPauseRule, 23},
	{"CmdResumeRule", CmdResumeRule, 24},
	{"CmdRetryDeliveries", CmdRetryDeliveries, 25},
	{"CmdRefireRun", CmdRefireRun, 26},
	{"CmdFoldDigest", CmdFoldDigest, 33},
	{"CmdSetDirectory", CmdSetDirectory, 41},
	{"CmdHoldDirectory", CmdHoldDirectory, 42},
	{"CmdConfirmDirectory", CmdConfirmDirectory, 43},
	{"CmdAddDeliveriesPacked", CmdAddDeliveriesPacked, 45},
	{"CmdClaimPacked", CmdClaimPacked, 46},
	{"CmdRecordResultsPacked", CmdRecordResultsPacked, 47},
	{"CmdObserveClocks", CmdObserveClocks, 49},
	{"CmdRecordEvent", CmdRecordEvent, 64},
	{"CmdEventsHandled", CmdEventsHandled, 65},
	{"CmdKfSynced", CmdKfSynced, 66},
	{"CmdReplaceTask", CmdReplaceTask, 67},
	{"CmdPruneEvents", CmdPruneEvents, 68},
	{"CmdRevokeMember", CmdRevokeMember, 61},
	{"CmdReadmitMember", CmdReadmitMember, 62},
	{"CmdRecallDeliveries", CmdRecallDeliveries, 71},
	{"CmdRecordRecalls", CmdRecordRecalls, 72},
	{"CmdHoldRun", CmdHoldRun, 73},
	{"CmdDecideRun", CmdDecideRun, 74},
	{"CmdClickCard", CmdClickCard, 75},
	{"CmdRecordCardUpdates", CmdRecordCardUpdates, 76},
	{"CmdRecordAudits", CmdRecordAudits, 81},
	{"CmdSubmitTasks", CmdSubmitTasks, 82},
}

func TestCommandNumbers(t *testing.T) {
	t.Parallel()
	seen := map[CommandType]string{}
	for _, c := range pinnedCommands {
		require.Equal(t, c.n, uint8(c.t), "%s is number %d in the log", c.name, c.n)
		require.Zero(t, c.t&CmdIgnorable, "%s: the flag bit is not part of a number", c.name)
		prev, dup := seen[c.t]
		require.False(t, dup, "%s and %s share a number", c.name, prev)
		seen[c.t] = c.name
	}
}

// declaredCommands parses the package's source for the constants of type
// CommandType (the flag bit CmdIgnorable aside) and the file each is
// declared in.
func declaredCommands(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		require.NoError(t, err)
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "CommandType" {
					continue
				}
				for _, n := range vs.Names {
					if n.Name != "CmdIgnorable" {
						out[n.Name] = name
					}
				}
			}
		}
	}
	return out
}

// TestCommandTable: every command number is declared in command.go's one
// block and pinned above, every declared command has a row in
// commandSpecs with an applier, and the table has no other rows.
func TestCommandTable(t *testing.T) {
	t.Parallel()
	declared := declaredCommands(t)
	pinned := map[string]bool{}
	inTable := map[CommandType]bool{}
	for _, c := range pinnedCommands {
		pinned[c.name] = true
		file, ok := declared[c.name]
		require.True(t, ok, "%s is pinned but not declared", c.name)
		require.Equal(t, "command.go", file, "%s: every command number is declared in command.go", c.name)
		spec, ok := commandSpecs[c.t]
		require.True(t, ok, "%s is not in commandSpecs", c.name)
		require.NotNil(t, spec.apply, "%s has no applier", c.name)
		require.Equal(t, strings.TrimPrefix(c.name, "Cmd"), spec.name, "%s: its name in messages", c.name)
		inTable[c.t] = true
	}
	for name := range declared {
		require.True(t, pinned[name], "%s is declared but its number is not pinned in pinnedCommands", name)
	}
	for ct := range commandSpecs {
		require.True(t, inTable[ct], "commandSpecs has %s, which is not a declared command", ct)
	}
}
