package cli

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/armor-apt/armor/controld/api"
)

// HooksCmd groups webhook administration.
type HooksCmd struct {
	Add       HooksAddCmd       `cmd:"" help:"Register a webhook: controld POSTs signed JSON to URL on each event; its secret is printed once."`
	List      HooksListCmd      `cmd:"" help:"List webhooks."`
	Remove    HooksRemoveCmd    `cmd:"" help:"Remove a webhook and its delivery log."`
	Log       HooksLogCmd       `cmd:"" help:"Show the delivery log: each delivery, its state and its attempts."`
	Ping      HooksPingCmd      `cmd:"" help:"Send a ping event to a webhook, to check its receiver."`
	Redeliver HooksRedeliverCmd `cmd:"" help:"Make a delivered or failed delivery again."`
}

// Help says what a delivery looks like.
func (c *HooksCmd) Help() string {
	return `controld POSTs each event a webhook asks for to its URL as JSON, signed with HMAC-SHA256 under the webhook's secret in the X-Armor-Signature-256 header (sha256=<hex>, as GitHub's X-Hub-Signature-256); X-Armor-Event names the event and X-Armor-Delivery the delivery, the same on each retry. A delivery that gets no 2xx answer within [hooks] timeout is retried with exponential backoff, by whichever controld replica claims it: at least once, never once per replica. Events: record, activate and rollback (with the paths the activation changed, for a CDN purge), key (a key added or removed), gc (for webhooks of "*" only).`
}

// HooksAddCmd registers a webhook.
type HooksAddCmd struct {
	ControlFlags
	URL   string   `arg:"" help:"Where events are POSTed (http:// or https://)."`
	Event []string `help:"Events to send (repeatable): record, activate, rollback, gc, key." required:"" enum:"record,activate,rollback,gc,key"`
	Scope []string `name:"for" help:"Repositories whose events are sent, or '*' for all (default: the repository of armor.toml)."`
}

// Run registers.
func (c *HooksAddCmd) Run(g *Globals) error {
	if len(c.Scope) > 0 {
		c.Repo = "-"
	}
	cl, repo, err := c.target(g)
	if err != nil {
		return err
	}
	scope := c.Scope
	if len(scope) == 0 {
		scope = []string{repo}
	}
	res, err := cl.CreateHook(g.ctx, api.CreateHookRequest{URL: c.URL, Events: c.Event, Repositories: scope})
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, res)
	}
	fmt.Fprintln(g.stdout, res.Secret)
	fmt.Fprintf(g.stderr, "webhook %s: %s of %s to %s; the secret above, which signs every delivery, is shown only once\n",
		res.Hook.ID, strings.Join(res.Hook.Events, ","), strings.Join(res.Hook.Repositories, ","), res.Hook.URL)
	return nil
}

// HooksListCmd lists webhooks.
type HooksListCmd struct {
	ControlFlags
}

// Run lists.
func (c *HooksListCmd) Run(g *Globals) error {
	c.Repo = "-"
	cl, _, err := c.target(g)
	if err != nil {
		return err
	}
	hs, err := cl.Hooks(g.ctx)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, hs)
	}
	tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tURL\tEVENTS\tREPOSITORIES\tCREATED")
	for _, h := range hs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", h.ID, h.URL, strings.Join(h.Events, ","), strings.Join(h.Repositories, ","), h.CreatedAt.UTC().Format(time.RFC3339))
	}
	return tw.Flush()
}

// HooksRemoveCmd removes a webhook.
type HooksRemoveCmd struct {
	ControlFlags
	ID string `arg:"" help:"Webhook id (armor hooks list)."`
}

// Run removes.
func (c *HooksRemoveCmd) Run(g *Globals) error {
	c.Repo = "-"
	cl, _, err := c.target(g)
	if err != nil {
		return err
	}
	h, err := cl.DeleteHook(g.ctx, c.ID)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, h)
	}
	fmt.Fprintf(g.stdout, "removed webhook %s (%s)\n", h.ID, h.URL)
	return nil
}

// HooksLogCmd shows the delivery log.
type HooksLogCmd struct {
	ControlFlags
	ID    string `arg:"" optional:"" help:"Webhook id (default: every webhook within the token's scope)."`
	Limit int    `help:"Show at most this many deliveries, newest first." default:"50"`
}

// Run shows the log.
func (c *HooksLogCmd) Run(g *Globals) error {
	c.Repo = "-"
	cl, _, err := c.target(g)
	if err != nil {
		return err
	}
	ds, err := cl.Deliveries(g.ctx, c.ID, c.Limit)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, ds)
	}
	tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DELIVERY\tHOOK\tEVENT\tREPOSITORY\tSTATE\tATTEMPTS\tLAST")
	for _, d := range ds {
		repo := d.Repository
		if repo == "" {
			repo = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s #%d\t%s\t%s\t%d\t%s\n", d.ID, d.Hook, d.Event, d.EventID, repo, deliveryState(d), len(d.Attempts), lastAttempt(d))
	}
	return tw.Flush()
}

// deliveryState says where a delivery stands.
func deliveryState(d api.Delivery) string {
	switch {
	case d.InFlight != nil:
		return "sending (" + d.InFlight.By + ")"
	case d.State == "pending" && d.NextAttempt != nil:
		return "retry at " + d.NextAttempt.UTC().Format(time.RFC3339)
	}
	return d.State
}

// lastAttempt summarises the latest attempt: when, by whom, and the answer.
func lastAttempt(d api.Delivery) string {
	if len(d.Attempts) == 0 {
		return "-"
	}
	a := d.Attempts[len(d.Attempts)-1]
	out := a.At.UTC().Format(time.RFC3339) + " " + a.By + " "
	switch {
	case a.OK:
		out += "HTTP " + strconv.Itoa(a.Status)
	default:
		out += a.Error
	}
	return out + " (" + a.Duration.D().Round(time.Millisecond).String() + ")"
}

// HooksPingCmd pings a webhook.
type HooksPingCmd struct {
	ControlFlags
	ID string `arg:"" help:"Webhook id (armor hooks list)."`
}

// Run pings.
func (c *HooksPingCmd) Run(g *Globals) error {
	c.Repo = "-"
	cl, _, err := c.target(g)
	if err != nil {
		return err
	}
	h, err := cl.PingHook(g.ctx, c.ID)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, h)
	}
	fmt.Fprintf(g.stdout, "ping queued for webhook %s (%s): armor hooks log %s shows how it went\n", h.ID, h.URL, h.ID)
	return nil
}

// HooksRedeliverCmd makes a delivery again.
type HooksRedeliverCmd struct {
	ControlFlags
	Delivery uint64 `arg:"" help:"Delivery id (armor hooks log)."`
}

// Run redelivers.
func (c *HooksRedeliverCmd) Run(g *Globals) error {
	c.Repo = "-"
	cl, _, err := c.target(g)
	if err != nil {
		return err
	}
	d, err := cl.Redeliver(g.ctx, c.Delivery)
	if err != nil {
		return err
	}
	if g.JSON {
		return printJSON(g.stdout, d)
	}
	fmt.Fprintf(g.stdout, "delivery %d of %s #%d to webhook %s queued again\n", d.ID, d.Event, d.EventID, d.Hook)
	return nil
}
