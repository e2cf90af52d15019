// Package fidelity checks the fake WeCom server (plugins/wecomfake) against
// third-party WeCom clients: if a widely used client library works against
// the fake, the fake answers as WeCom does. It is a module of its own so
// that those libraries (and what they pull in: Redis and memcached
// clients) stay out of the product's go.mod; it builds against the Herald
// module in this repository (a replace directive). `make test` runs it.
package fidelity
