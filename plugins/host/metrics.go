package host

import "github.com/prometheus/client_golang/prometheus"

var channelHealthyDesc = prometheus.NewDesc("herald_channel_healthy",
	"1 while the channel's plugin runs and answers its health checks, 0 while it is down or misconfigured.",
	[]string{"channel", "plugin"}, nil)

// healthCollector reports each channel's health at scrape time.
type healthCollector struct{ h *Host }

// Collector returns a Prometheus collector of herald_channel_healthy
// {channel, plugin}, read from Status at each scrape.
func (h *Host) Collector() prometheus.Collector { return healthCollector{h} }

func (c healthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- channelHealthyDesc }

func (c healthCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.h.Status() {
		v := 0.0
		if s.Healthy {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(channelHealthyDesc, prometheus.GaugeValue, v, s.Name, s.Plugin)
	}
}
