package sdk

import "context"

// HealthChecker is optionally implemented by a Channel that can tell whether
// it is able to deliver (for example, whether its access token is fresh).
// The host calls Health periodically and shows the error in its status; it
// does not restart a plugin for it (a restart cures a stuck process, not an
// unreachable provider). A Channel without it is healthy while its process
// answers.
type HealthChecker interface {
	Health(ctx context.Context) error
}
