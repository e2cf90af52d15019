package callback

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
)

// Event is one verified callback as Herald records it. Type is
// "wecom.kf_msg_or_event", "wecom.template_card_event",
// "wecom.change_external_contact", else "wecom." and the event's (or
// message's) own name. Data holds the message's elements by their XML
// names (FromUserName, EventKey, …), as strings.
type Event struct {
	ID   string
	Type string
	Data json.RawMessage
}

// envelope is the outer XML of a POST: the encrypted message.
type envelope struct {
	ToUserName string `xml:"ToUserName"`
	Encrypt    string `xml:"Encrypt"`
	AgentID    string `xml:"AgentID"`
}

// ErrBadXML is returned when the body or the decrypted message is not the XML expected.
var ErrBadXML = errors.New("wecom callback: the body is not WeCom's XML")

// readEnvelope reads the outer XML and returns its Encrypt.
func readEnvelope(body []byte) (string, error) {
	var env envelope
	if err := xml.Unmarshal(body, &env); err != nil || env.Encrypt == "" {
		return "", ErrBadXML
	}
	return env.Encrypt, nil
}

// Fields reads a decrypted message's top-level elements: name → text
// (an element with children keeps its inner XML, as SelectedItems does).
func Fields(msg []byte) (map[string]string, error) {
	dec := xml.NewDecoder(bytes.NewReader(msg))
	out := map[string]string{}
	depth := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, ErrBadXML
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			if depth == 1 {
				if t.Name.Local != "xml" {
					return nil, ErrBadXML
				}
				continue
			}
			if depth == 2 {
				var inner struct {
					Inner []byte `xml:",innerxml"`
				}
				if err := dec.DecodeElement(&inner, &t); err != nil {
					return nil, ErrBadXML
				}
				depth--
				out[t.Name.Local] = cdataText(inner.Inner)
			}
		case xml.EndElement:
			depth--
		}
	}
	if len(out) == 0 {
		return nil, ErrBadXML
	}
	return out, nil
}

// cdataText is an element's text: its character data (CDATA unwrapped,
// entities decoded), or its inner XML when it has child elements.
func cdataText(inner []byte) string {
	dec := xml.NewDecoder(bytes.NewReader(inner))
	var sb strings.Builder
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch t := tok.(type) {
		case xml.CharData:
			sb.Write(t)
		case xml.StartElement:
			return strings.TrimSpace(string(inner))
		}
	}
	return strings.TrimSpace(sb.String())
}

// ToEvent makes the event of a decrypted message received on channel.
// Its id is MsgId when the message has one, else a hash of all its
// fields: WeCom's retries and the same callback at another node carry the
// same fields, and two distinct events differ in one (deduplicating by
// sender and time alone dropped distinct events in other libraries).
func ToEvent(channel string, f map[string]string) Event {
	name := f["MsgType"]
	if name == "event" {
		name = f["Event"]
	}
	if name == "" {
		name = "unknown"
	}
	ev := Event{Type: "wecom." + name}
	if id := f["MsgId"]; id != "" {
		ev.ID = "wecom:" + channel + ":msg:" + id
	} else {
		h := sha256.New()
		for _, k := range slices.Sorted(maps.Keys(f)) {
			h.Write([]byte(k))
			h.Write([]byte{0})
			h.Write([]byte(f[k]))
			h.Write([]byte{0})
		}
		ev.ID = "wecom:" + channel + ":" + name + ":" + hex.EncodeToString(h.Sum(nil)[:16])
	}
	ev.Data, _ = json.Marshal(f) // a map of strings always encodes
	return ev
}
