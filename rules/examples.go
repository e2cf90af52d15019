package rules

import (
	"embed"
	"io/fs"
)

// Examples are the example rule files and people file (rules/examples),
// one for every seed scenario, under ExamplesDir. `herald dev` writes them
// to disk.
//
//go:embed examples/*.lua examples/people.csv
var Examples embed.FS

// ExamplesDir is the directory of the examples inside Examples.
const ExamplesDir = "examples"

// ExamplesFS is the examples rooted at their directory, ready for
// os.CopyFS.
func ExamplesFS() fs.FS {
	sub, err := fs.Sub(Examples, ExamplesDir)
	if err != nil {
		panic(err) // ExamplesDir is a constant that the embed pattern names
	}
	return sub
}
