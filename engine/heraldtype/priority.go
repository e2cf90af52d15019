package heraldtype

import "fmt"

// Priority orders due deliveries; lower numbers go first. The host keeps a
// share of every rate limit for PriorityHigh.
type Priority uint8

// Append-only: priorities are replicated.
const (
	PriorityHigh   Priority = 1
	PriorityNormal Priority = 2
	PriorityLow    Priority = 3
)

// ParsePriority reads "high", "normal" (or "") and "low".
func ParsePriority(s string) (Priority, error) {
	switch s {
	case "high":
		return PriorityHigh, nil
	case "normal", "":
		return PriorityNormal, nil
	case "low":
		return PriorityLow, nil
	}
	return 0, fmt.Errorf("priority %q: want high, normal or low", s)
}

func (p Priority) String() string {
	switch p {
	case PriorityHigh:
		return "high"
	case PriorityNormal:
		return "normal"
	case PriorityLow:
		return "low"
	}
	return fmt.Sprintf("priority(%d)", uint8(p))
}
