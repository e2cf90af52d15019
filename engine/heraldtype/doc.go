// Package heraldtype holds the plain values that travel the delivery path
// from the engine through the plugins host to a channel plugin and back: a
// message handed to a channel, the channel's verdict on it, and the
// priority that orders it. It is a leaf: it imports only the standard
// library, so the engine, the plugins host, the plugin SDK (which re-exports
// these types under its own names) and a third party's plugin can all
// import it without pulling in any of Herald's machinery.
//
// The numbers of Status and Priority are replicated in the log and in
// snapshots: append only, never renumbered.
package heraldtype
