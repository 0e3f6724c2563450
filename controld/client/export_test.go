package client

import "time"

// SetReadAttempt sets c's bound on one replica's answer to a read, so that tests need
// not wait ReadAttempt.
func SetReadAttempt(c *Client, d time.Duration) { c.readAttempt = d }
