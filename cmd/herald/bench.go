package main

import "github.com/heraldhq/herald/cmd/herald/bench"

// The harness is a package of its own (cmd/herald/bench); it registers like
// every other command group, from init, so main.go is not edited for it.
func init() { register(bench.Command) }
