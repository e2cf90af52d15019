package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// DeliveryID is the deterministic id of a run's delivery to one recipient:
// every leader that plans the run computes the same ids, so re-planning a
// half planned run is idempotent.
func DeliveryID(runKey, recipient string) string {
	h := sha256.Sum256([]byte(runKey + "\x00" + recipient))
	return hex.EncodeToString(h[:16])
}

// RunKey names a scheduled run of rule at slot.
func RunKey(rule string, slot time.Time) string {
	return rule + "@" + slot.UTC().Format(time.RFC3339)
}

// ZoneRunKey names the run of a per-recipient rule (timezone =
// "recipient") for the people of zone at slot: a local slot fires once per
// zone, as a slot of any rule fires once.
func ZoneRunKey(rule, zone string, slot time.Time) string {
	return RunKey(rule, slot) + "@" + zone
}

// LocalSlotKey names a local slot of a per-recipient rule by its wall
// clock, without zone: the delivery ids of a per-recipient run hash it
// instead of the run key, so a person whose zone changed on the day still
// gets 09:00 once.
func LocalSlotKey(rule string, slot time.Time, zone string) string {
	return rule + "@local:" + slot.In(ZoneLocation(zone)).Format("2006-01-02T15:04:05")
}

// TaskRunKey names the run of an API task.
func TaskRunKey(taskKey string) string { return "task:" + taskKey }

// Offset returns how long after the slot a recipient's message is planned.
// It depends only on the run key and the recipient, so every leader computes
// the same time. Unless the rule asks for no stagger, nothing lands on the
// exact :00 or :30 second of a minute-aligned slot: WeCom advises against
// sending then.
func (s Stagger) Offset(runKey, recipient string, index, total int) time.Duration {
	h := sha256.Sum256([]byte(runKey + "\x01" + recipient))
	u := binary.BigEndian.Uint64(h[:8])
	switch {
	case s.Batches > 1 && total > 0:
		// Waves: recipient i of n goes in wave i*batches/n.
		wave := index * s.Batches / total
		off := time.Duration(wave) * s.Spacing
		if off%(30*time.Second) == 0 {
			off += time.Second // keep every wave off the :00 and :30 marks
		}
		return off
	case s.Jitter > 0:
		off := time.Duration(u % uint64(s.Jitter))
		if off < time.Second {
			off = time.Second
		}
		if off%(30*time.Second) < time.Second {
			off += time.Second
		}
		return off
	}
	return 0
}
