// Package hooks delivers controld's webhooks: it claims due deliveries from the state
// store's outbox (state.Hooks), signs each body with its hook's secret
// (api.SignHook), POSTs it, and records the attempt, retrying failures with exponential
// backoff until Config.MaxAttempts.
//
// Every controld process runs a Dispatcher over the same store. A delivery is leased to
// one process at a time for the length of one attempt (twice the timeout, plus five
// seconds); a process that dies mid-attempt leaves the lease to expire, and whichever
// process claims the delivery next makes it again. So each delivery is made at least
// once, by one process at a time, never once per replica. Receivers deduplicate by the
// X-Armor-Delivery header.
//
// What a body says (the payload) is controld's to render: the Dispatcher asks its
// Renderer. It knows nothing of HTTP handlers or of the API that manages the hooks.
package hooks
