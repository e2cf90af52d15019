package engine

import (
	"encoding/json"
	"fmt"
)

// CommandType is the first byte of every replicated command. The numbers
// are part of the log format: append only, never renumber, never reuse.
type CommandType uint8

const (
	CmdStartRun      CommandType = 1
	CmdAddDeliveries CommandType = 2
	CmdClaim         CommandType = 3
	CmdRecordResults CommandType = 4
	CmdUpsertMember  CommandType = 5
	CmdRemoveMember  CommandType = 6
	CmdInitCursor    CommandType = 7
	CmdFinishPlan    CommandType = 8
)

// CommandVersion is the body encoding version, the second byte of every
// command. A node refuses (stops on) a version it does not know.
const CommandVersion = 1

var commandNames = map[CommandType]string{
	CmdStartRun:      "StartRun",
	CmdAddDeliveries: "AddDeliveries",
	CmdClaim:         "Claim",
	CmdRecordResults: "RecordResults",
	CmdUpsertMember:  "UpsertMember",
	CmdRemoveMember:  "RemoveMember",
	CmdInitCursor:    "InitCursor",
	CmdFinishPlan:    "FinishPlan",
}

func (t CommandType) String() string {
	if n, ok := commandNames[t]; ok {
		return n
	}
	return fmt.Sprintf("command(%d)", uint8(t))
}

// Encode builds a replicated command: type byte, version byte, JSON body.
func Encode(t CommandType, body any) ([]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", t, err)
	}
	out := make([]byte, 0, len(b)+2)
	out = append(out, byte(t), CommandVersion)
	return append(out, b...), nil
}

// Member is a cluster member as the replicated state records it: Raft knows
// ids and Raft addresses; the HTTP address is what clients and forwarding
// need.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	HTTPAddr string `json:"http_addr"`
}

// RemoveMember is the body of CmdRemoveMember.
type RemoveMember struct {
	ID string `json:"id"`
}
