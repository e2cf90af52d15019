// Command herald-channel-example is an example channel plugin: it "delivers"
// by appending a line per message to a file. Build it and drop it into the
// plugins directory:
//
//	go build -o plugins/herald-channel-example ./plugins/examples/herald-channel-example
//
// then use it in the node configuration:
//
//	channels:
//	  audit_log:
//	    plugin: example
//	    file: /var/log/herald/audit.log
//
// Copy this directory to start a plugin of your own: implement sdk.Channel
// and call sdk.Serve from main.
package main

import "github.com/heraldhq/herald/plugins/sdk"

func main() {
	sdk.Serve(newChannel())
}
