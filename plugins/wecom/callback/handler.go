package callback

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of HandlerConfig.
const (
	// RecordTimeoutDefault bounds the replication of one callback: WeCom
	// retries an answer slower than 5 s, so the answer comes well before.
	RecordTimeoutDefault = 3 * time.Second
	// MaxBodyDefault bounds a callback body; WeCom's are a few KiB.
	MaxBodyDefault = 256 << 10
)

// HandlerConfig configures the receiver.
type HandlerConfig struct {
	// Channels are the wecom channels with a callback, by name.
	Channels map[string]*Crypter
	// RecordFunc replicates one event of channel; created is false when
	// its id was known (a retry). It must be idempotent by ev.ID.
	RecordFunc func(ctx context.Context, channel string, ev Event) (created bool, err error)
	// RecordTimeout: default RecordTimeoutDefault.
	RecordTimeout time.Duration
	MaxBody       int64
	Logger        *slog.Logger
	// Registerer receives the receiver's metrics; nil: not registered.
	Registerer prometheus.Registerer
}

// Handler serves GET and POST /v1/wecom/callback/{channel}.
type Handler struct {
	cfg      HandlerConfig
	refused  *prometheus.CounterVec
	received *prometheus.CounterVec
}

// NewHandler builds the receiver and registers its metrics.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if cfg.RecordFunc == nil {
		return nil, errors.New("wecom callback: RecordFunc is required")
	}
	if cfg.RecordTimeout <= 0 {
		cfg.RecordTimeout = RecordTimeoutDefault
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = MaxBodyDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	h := &Handler{
		cfg: cfg,
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_wecom_callback_refused_total",
			Help: "WeCom callbacks refused with 403 by this node: reason signature (msg_signature wrong), cipher (does not decrypt) or receiver (another CorpID).",
		}, []string{"channel", "reason"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "herald_wecom_callback_events_total",
			Help: "Verified WeCom callbacks by result: new (an event recorded), duplicate (its id was known: a retry or another node had it), failed (not replicated in time; WeCom retries).",
		}, []string{"channel", "result"}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{h.refused, h.received} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return h, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("channel")
	c, ok := h.cfg.Channels[name]
	if !ok {
		http.Error(w, fmt.Sprintf("no wecom channel %q with a callback (callback_token and callback_aes_key) on this node", name), http.StatusNotFound)
		return
	}
	q := r.URL.Query()
	sig, ts, nonce := q.Get("msg_signature"), q.Get("timestamp"), q.Get("nonce")
	if sig == "" || ts == "" || nonce == "" {
		http.Error(w, "msg_signature, timestamp and nonce are required", http.StatusBadRequest)
		return
	}
	switch r.Method {
	case http.MethodGet:
		h.verifyURL(w, name, c, sig, ts, nonce, q.Get("echostr"))
	case http.MethodPost:
		h.receive(w, r, name, c, sig, ts, nonce)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "use GET (URL verification) or POST (events)", http.StatusMethodNotAllowed)
	}
}

// verifyURL answers WeCom's URL check: the decrypted echostr, alone.
func (h *Handler) verifyURL(w http.ResponseWriter, name string, c *Crypter, sig, ts, nonce, echostr string) {
	if echostr == "" {
		http.Error(w, "echostr is required", http.StatusBadRequest)
		return
	}
	msg, err := h.open(name, c, sig, ts, nonce, echostr)
	if err != nil {
		h.refuse(w, name, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(msg)
}

func (h *Handler) open(name string, c *Crypter, sig, ts, nonce, encrypted string) ([]byte, error) {
	if err := c.Verify(sig, ts, nonce, encrypted); err != nil {
		return nil, err
	}
	return c.Decrypt(encrypted)
}

func (h *Handler) refuse(w http.ResponseWriter, name string, err error) {
	reason := "signature"
	switch {
	case errors.Is(err, ErrBadCipher):
		reason = "cipher"
	case errors.Is(err, ErrBadReceiver):
		reason = "receiver"
	}
	h.refused.WithLabelValues(name, reason).Inc()
	h.cfg.Logger.Warn("wecom callback refused", "channel", name, "reason", reason)
	http.Error(w, err.Error(), http.StatusForbidden)
}

// receive verifies, decrypts and replicates one event, then answers: an
// empty 200 once the event is committed (milliseconds), a 503 if it was
// not within RecordTimeout, so that WeCom sends it again (the id makes
// the retry the same event). Everything slow (kf/sync_msg, the rules'
// hooks) happens on the leader after the answer.
func (h *Handler) receive(w http.ResponseWriter, r *http.Request, name string, c *Crypter, sig, ts, nonce string) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	if err != nil {
		http.Error(w, fmt.Sprintf("the body is over %d bytes", h.cfg.MaxBody), http.StatusRequestEntityTooLarge)
		return
	}
	enc, err := readEnvelope(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	msg, err := h.open(name, c, sig, ts, nonce, enc)
	if err != nil {
		h.refuse(w, name, err)
		return
	}
	f, err := Fields(msg)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ev := ToEvent(name, f)
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.RecordTimeout)
	defer cancel()
	created, err := h.cfg.RecordFunc(ctx, name, ev)
	if err != nil {
		h.received.WithLabelValues(name, "failed").Inc()
		h.cfg.Logger.Warn("wecom callback not recorded; WeCom will retry", "channel", name, "event", ev.ID, "err", err)
		http.Error(w, "the event was not recorded in time; send it again", http.StatusServiceUnavailable)
		return
	}
	result := "duplicate"
	if created {
		result = "new"
	}
	h.received.WithLabelValues(name, result).Inc()
	w.WriteHeader(http.StatusOK)
}
