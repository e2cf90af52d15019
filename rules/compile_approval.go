package rules

import (
	lua "github.com/yuin/gopher-lua"
)

// readApproval reads approval = { over = N }: a run planned for more than
// N people waits for approval (engine/approval.go).
func (c *compiled) readApproval(v lua.LValue, fail func(string, string, ...any) error) error {
	if v == lua.LNil {
		return nil
	}
	const want = `approval: want { over = N } (a whole number of people, at least 1)`
	t, ok := v.(*lua.LTable)
	if !ok {
		return fail(keyApproval, "%s, got %s", want, v.Type())
	}
	var err error
	eachPair(t, func(k, v lua.LValue) bool {
		switch luaString(k) {
		case "over":
			n, ok := v.(lua.LNumber)
			if !ok || float64(n) != float64(int64(n)) || n < 1 || n > 1e9 {
				err = fail(keyApproval, "%s; over is %s", want, v.String())
				return false
			}
			c.rule.ApprovalOver = int(n)
		default:
			err = fail(keyApproval, "%s; unknown field %s", want, k.String())
			return false
		}
		return true
	})
	if err == nil && c.rule.ApprovalOver == 0 {
		err = fail(keyApproval, "%s; over is missing", want)
	}
	return err
}
