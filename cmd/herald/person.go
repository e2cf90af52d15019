package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// personDelivery is what `deliveries list --recipient` shows of a delivery.
type personDelivery struct {
	deliveryRow
	RecipientName string          `json:"recipient_name"`
	Slot          time.Time       `json:"slot"`
	EndedAt       time.Time       `json:"ended_at"`
	Code          string          `json:"code"`
	Payload       json.RawMessage `json:"payload"`
	Failures      []struct {
		At      time.Time `json:"at"`
		Attempt int       `json:"attempt"`
		Outcome string    `json:"outcome"`
		Code    string    `json:"code"`
		Error   string    `json:"error"`
	} `json:"failures"`
}

// printPersonDeliveries answers "did 李娜 get it?": each delivery of the
// day to the person, its state and times, why each attempt failed, and
// the message as sent.
func printPersonDeliveries(cmd *cobra.Command, query, date string, people []map[string]string, raws []json.RawMessage, total int) error {
	w := cmd.OutOrStdout()
	var who []string
	for _, p := range people {
		if p["name"] != "" {
			who = append(who, p["name"]+" ("+p["userid"]+")")
		} else {
			who = append(who, p["userid"])
		}
	}
	if len(who) == 0 {
		who = []string{query}
	}
	fmt.Fprintf(w, "%s, %s: %d deliveries\n", strings.Join(who, ", "), date, total)
	for _, raw := range raws {
		var d personDelivery
		if err := json.Unmarshal(raw, &d); err != nil {
			return fmt.Errorf("bad response: %w", err)
		}
		fmt.Fprintf(w, "\n%s  %s  %s  attempts %d  (id %s)\n", d.Rule, strings.ToUpper(d.State), d.Recipient, d.Attempts, d.ID[:min(12, len(d.ID))])
		fmt.Fprintf(w, "  slot      %s\n  planned   %s\n", showTime(cmd, d.Slot), showTime(cmd, d.NotBefore))
		for _, f := range d.Failures {
			code := ""
			if f.Code != "" {
				code = "[" + f.Code + "] "
			}
			fmt.Fprintf(w, "  %-9s %s attempt %d: %s%s\n", f.Outcome, showTime(cmd, f.At), f.Attempt, code, f.Error)
		}
		if !d.SentAt.IsZero() {
			fmt.Fprintf(w, "  sent      %s\n", showTime(cmd, d.SentAt))
		} else if !d.EndedAt.IsZero() {
			fmt.Fprintf(w, "  ended     %s\n", showTime(cmd, d.EndedAt))
		}
		fmt.Fprintf(w, "  content   %s\n", indent(messageText(d.Payload), "            "))
	}
	return nil
}

// messageText is the readable text of a message payload: its content
// (text, markdown, or WeCom's own body), else the JSON.
func messageText(payload json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(payload, &m) != nil {
		return string(payload)
	}
	if c, ok := m["content"].(string); ok {
		return c
	}
	if kind, ok := m["msgtype"].(string); ok {
		if body, ok := m[kind].(map[string]any); ok {
			if c, ok := body["content"].(string); ok {
				return c
			}
		}
	}
	return string(payload)
}

func indent(s, pad string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
}
