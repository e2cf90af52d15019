//go:build !unix

package mock

import "os"

// Without flock, processes sharing one outbox may miss each other's lines;
// a single mock process per outbox still deduplicates correctly.
func lockFile(*os.File) error   { return nil }
func unlockFile(*os.File) error { return nil }
