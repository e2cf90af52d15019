package rules

import "embed"

// Examples are the example rule files and people file (rules/examples),
// one for every seed scenario. `herald dev` writes them to disk; `herald
// rules` commands default to them.
//
//go:embed examples/*.lua examples/people.csv
var Examples embed.FS

// ExamplesDir is the directory of the examples inside Examples.
const ExamplesDir = "examples"
