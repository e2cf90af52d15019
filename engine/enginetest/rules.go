package enginetest

import (
	"context"

	"github.com/heraldhq/herald/engine"
)

// Rules is a fixed rule set that plans no messages: what a test of the API
// or the CLI needs of the rules (their names, schedules and zones, and a
// hash), with no Lua behind it.
type Rules struct {
	List    []engine.Rule
	SetHash string
}

// Rules returns the list.
func (r Rules) Rules() []engine.Rule { return r.List }

// Hash returns SetHash.
func (r Rules) Hash() string { return r.SetHash }

// Plan plans nobody.
func (Rules) Plan(context.Context, string, engine.RunContext) ([]engine.Planned, error) {
	return nil, nil
}

// OnFailed does nothing, as for a rule without the hook.
func (Rules) OnFailed(context.Context, string, engine.RunContext, engine.FailedDelivery, engine.SubmitFunc) error {
	return nil
}

var _ engine.RuleSource = Rules{}
