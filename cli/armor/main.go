// Command armor publishes Debian (APT) repositories: build a signed tree and manifest,
// push it to a content-addressed store, and run the control daemon and the edge.
package main

import (
	"os"

	"github.com/armor-apt/armor/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
