package rules

import (
	"unsafe"

	lua "github.com/yuin/gopher-lua"
)

// gopher-lua's `..` (the CONCAT instruction) joins its operands in one Go
// call, without a metamethod for strings or numbers, so a rule can
// allocate any size between two of the memory watch's samples: ten
// doublings of a 1 MiB string, or s..s..s.. of 200 operands, is a
// gigabyte in one instruction. There is no option or hook for it, so the
// instruction's entry in gopher-lua's dispatch table is wrapped here (the
// table is unexported: go:linkname, tied to gopher-lua v1.1.2's layout of
// it; TestConcatOverLimitRefused fails if that changes) to add up the
// operands first and stop the call, before it allocates, when the result
// would take the call past its memory limit (memCall.admit).
//
//go:linkname luaJumpTable github.com/yuin/gopher-lua.jumpTable
var luaJumpTable [lua.OP_NOP + 1]func(*lua.LState, uint32, unsafe.Pointer) int

func init() {
	concat := luaJumpTable[lua.OP_CONCAT]
	luaJumpTable[lua.OP_CONCAT] = func(L *lua.LState, inst uint32, frame unsafe.Pointer) int {
		checkConcatSize(L, inst)
		return concat(L, inst, frame)
	}
}

// concatNumberLen is the longest a number becomes in a concatenation.
const concatNumberLen = 32

// checkConcatSize refuses R(A) := R(B).. ... ..R(C) when its result would
// take the call past its memory limit. Results up to 1 MiB are not
// looked at.
func checkConcatSize(L *lua.LState, inst uint32) {
	b, c := int(inst&0x1ff), int(inst>>9)&0x1ff // the instruction's B and C
	size := 0
	for r := b; r <= c; r++ {
		switch v := L.Get(r + 1).(type) { // registers of the running function, 1-based
		case lua.LString:
			size += len(v)
		case lua.LNumber:
			size += concatNumberLen
		}
	}
	if size <= maxStringLen {
		return
	}
	if m := callMemory(L.Context()); m != nil {
		if err := m.admit(uint64(size)); err != nil {
			m.stop(err) // as by the watch, so that pcall cannot go on with it
			L.RaiseError("%s", err.Error())
		}
	}
}
