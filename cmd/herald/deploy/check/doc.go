// Package check holds the tests of Herald's deployment files
// (cmd/herald/deploy): the Kubernetes manifests decoded strictly into the
// Kubernetes API types, the Dockerfile parsed by BuildKit's parser, and
// compose.yaml, each checked against the agent's own config keys, ports
// and probe paths. A module of its own, so that k8s.io/api and BuildKit
// stay out of Herald's go.mod; `make test` runs it (TEST_MODULES).
package check
