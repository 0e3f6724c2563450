package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/armor-apt/armor/controld/api"
)

// CreateHook registers a webhook (admin on every repository it covers); the response
// holds its signing secret, shown only here.
func (c *Client) CreateHook(ctx context.Context, req api.CreateHookRequest) (*api.CreateHookResponse, error) {
	var out api.CreateHookResponse
	return &out, c.do(ctx, http.MethodPost, "/v1/hooks", req, &out)
}

// Hooks lists the webhooks within the token's scope (admin).
func (c *Client) Hooks(ctx context.Context) ([]api.Hook, error) {
	var out []api.Hook
	return out, c.do(ctx, http.MethodGet, "/v1/hooks", nil, &out)
}

// DeleteHook removes a webhook and its delivery log (admin).
func (c *Client) DeleteHook(ctx context.Context, id string) (*api.Hook, error) {
	var out api.Hook
	return &out, c.do(ctx, http.MethodDelete, "/v1/hooks/"+url.PathEscape(id), nil, &out)
}

// PingHook queues a ping delivery to one webhook (admin).
func (c *Client) PingHook(ctx context.Context, id string) (*api.Hook, error) {
	var out api.Hook
	return &out, c.do(ctx, http.MethodPost, "/v1/hooks/"+url.PathEscape(id)+"/ping", nil, &out)
}

// Deliveries reads the delivery log, newest first: of one hook, or of every hook within
// the token's scope when hook is "", at most limit (0: controld's default, 100).
func (c *Client) Deliveries(ctx context.Context, hook string, limit int) ([]api.Delivery, error) {
	q := url.Values{}
	if hook != "" {
		q.Set("hook", hook)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := "/v1/hooks/deliveries"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out []api.Delivery
	return out, c.do(ctx, http.MethodGet, path, nil, &out)
}

// Redeliver makes a delivered or failed delivery due again (admin).
func (c *Client) Redeliver(ctx context.Context, id uint64) (*api.Delivery, error) {
	var out api.Delivery
	return &out, c.do(ctx, http.MethodPost, "/v1/hooks/deliveries/"+strconv.FormatUint(id, 10)+"/redeliver", nil, &out)
}
