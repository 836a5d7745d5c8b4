package auth

import "time"

// KeyCreateArgs are keys.create's arguments. CreateKey checks them (the
// CLI creates keys without the dispatcher).
type KeyCreateArgs struct {
	Name string `json:"name" required:"true" minLength:"1" maxLength:"64" doc:"a label for the key"`
	Role string `json:"role" required:"true" enum:"admin,agent,viewer" doc:"what the key may do"`
	// RateLimits are the key's own limits; see Service.CreateKeyWithLimits.
	RateLimits string `json:"rate_limits,omitempty" maxLength:"1024" doc:"the key's own rate limits in SANDBOX_RATE_LIMITS syntax (file, code, command, browser, read, manage), e.g. command=60/m,code=5/m; each at or below the server's limit (above it: 422)"`
}

// KeyIDArgs name a key.
type KeyIDArgs struct {
	ID string `json:"id" required:"true" maxLength:"64" doc:"key id"`
}

// CreatedKey is a new key with its secret, shown only in the answer that
// created it.
type CreatedKey struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Role      Role      `json:"role"`
	Key       string    `json:"key" doc:"the secret; store it now, it is never shown again"`
	CreatedAt time.Time `json:"created_at"`
	// RateLimits echoes the key's own limits in canonical form.
	RateLimits string `json:"rate_limits,omitempty" doc:"the key's own rate limits; absent: the server's"`
}

// TicketArgs are tickets.create's arguments: the routes the ticket opens.
type TicketArgs struct {
	Scope string `json:"scope" required:"true" enum:"terminal,cdp,vnc,preview,console" doc:"the routes the ticket opens: terminal (the shell WebSocket), cdp (the DevTools relay), vnc (the desktop relay), preview (the preview proxy and content sessions), console (signing a browser in to the web console); any other route refuses it"`
}

// Ticket is a one-time credential for browsers and WebSockets: pass it as
// ?ticket=… on one request of its scope within TicketTTL.
type Ticket struct {
	Ticket    string    `json:"ticket"`
	Scope     string    `json:"scope"`
	ExpiresAt time.Time `json:"expires_at"`
}
