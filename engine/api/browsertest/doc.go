// Package browsertest holds Herald's browser tests: the dashboard driven
// in headless Chromium through chromedp. It is a module of its own so that
// chromedp and its dependencies stay out of the product's go.mod; it
// builds against the Herald module in this repository (a replace
// directive). Run it with `make test`, or here with `go test -race ./...`.
//
// Put every test that needs a browser here, beside the others; tests of
// the API and the dashboard's files that need none stay in engine/api.
package browsertest
