package heraldtype

// ChannelStatus is the state of one channel instance, as the plugins host
// reports it and GET /v1/status serves it. It never holds a secret.
type ChannelStatus struct {
	Name     string `json:"name"`
	Plugin   string `json:"plugin"`
	Version  string `json:"version,omitempty"` // the plugin's version, once it started
	Healthy  bool   `json:"healthy"`
	Error    string `json:"error,omitempty"` // why it is not healthy
	Restarts int    `json:"restarts"`        // restarts since the host started
}
