// Package fault is the small, closed set of error kinds that cross the edge
// of the server. Capability packages return fault errors for conditions a
// client caused or must know about; internal/api maps each kind to one HTTP
// status in a single table.
//
// It stops internal detail from leaking to clients: a fault carries a public
// message (shown to the client) separately from the wrapped cause (kept for
// the operator's log). Anything that is not a fault is reported to clients as
// Internal with a generic message, so a host path or stack trace inside an
// ordinary error can never reach a response body.
package fault

import (
	"errors"
	"fmt"
)

// Kind classifies an error for the edge. The string value is the stable
// machine-readable code clients see in data.code.
type Kind string

// The kinds. Keep this list short: every kind needs a status in internal/api.
const (
	Invalid          Kind = "invalid"            // malformed or semantically wrong input
	Unauthorized     Kind = "unauthorized"       // no or bad credential
	Forbidden        Kind = "forbidden"          // authenticated, but not allowed
	NotFound         Kind = "not_found"          // no such thing (or not visible to the caller)
	Conflict         Kind = "conflict"           // state does not allow the request (exists, busy, halted)
	TooLarge         Kind = "too_large"          // body, file or result over a configured cap
	RateLimited      Kind = "rate_limited"       // a limit or the failed-auth lockout refused the request
	Unavailable      Kind = "unavailable"        // temporarily unable (shutting down, dependency down)
	Internal         Kind = "internal"           // a bug or an unexpected failure; detail only in the log
	Timeout          Kind = "timeout"            // an operation ran past its deadline
	Unsupported      Kind = "unsupported"        // the feature is not available on this host/build
	Misdirected      Kind = "misdirected"        // the request named a host this server does not answer for
	Unprocessable    Kind = "unprocessable"      // well-formed but failed schema validation
	MethodNotAllowed Kind = "method_not_allowed" // the route exists, not with this method
	Gone             Kind = "gone"               // existed, and is no longer kept (evicted output)
)

// Error is an error with a Kind, a public message and an optional cause.
type Error struct {
	Kind Kind
	// Msg is safe to show to a client.
	Msg string
	// Field names the offending input field for Invalid/Unprocessable
	// errors ("body.name", "query.since"); empty when not applicable.
	Field string
	// RetryAfter, in whole seconds, for RateLimited and Unavailable; 0 if unset.
	RetryAfter int
	// Err is the cause, for logs only; never shown to clients.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		if e.Msg == "" {
			return fmt.Sprintf("%s: %v", e.Kind, e.Err)
		}
		return fmt.Sprintf("%s: %s: %v", e.Kind, e.Msg, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Kind, e.Msg)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// New returns a fault of kind with a public message.
func New(kind Kind, msg string) error {
	return &Error{Kind: kind, Msg: msg}
}

// Errorf returns a fault of kind with a formatted public message. Do not
// format secrets or host paths into it: the message is shown to clients.
// A %w verb in format is honoured: the wrapped error is kept as the cause.
func Errorf(kind Kind, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &Error{Kind: kind, Msg: err.Error(), Err: errors.Unwrap(err)}
}

// Wrap returns a fault of kind whose public message is publicMsg and whose
// cause (for logs) is err. Wrap(kind, nil, msg) is New(kind, msg).
func Wrap(kind Kind, err error, publicMsg string) error {
	return &Error{Kind: kind, Msg: publicMsg, Err: err}
}

// InvalidField returns an Invalid fault naming the offending field.
func InvalidField(field, msg string) error {
	return &Error{Kind: Invalid, Msg: msg, Field: field}
}

// WithRetryAfter returns a RateLimited fault telling the client when to retry.
func WithRetryAfter(kind Kind, seconds int, msg string) error {
	return &Error{Kind: kind, Msg: msg, RetryAfter: seconds}
}

// KindOf returns the kind of the outermost fault in err's chain, or Internal
// when err carries none. KindOf(nil) is "".
func KindOf(err error) Kind {
	if err == nil {
		return ""
	}
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Kind
	}
	return Internal
}

// Public returns the message that may be shown to a client for err: the
// fault's public message, or a generic text for anything else.
func Public(err error) string {
	if err == nil {
		return ""
	}
	var fe *Error
	if errors.As(err, &fe) && fe.Msg != "" {
		return fe.Msg
	}
	switch KindOf(err) {
	case Internal:
		return "internal error"
	default:
		return string(KindOf(err))
	}
}

// FieldOf returns the field named by the fault in err's chain, if any.
func FieldOf(err error) string {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Field
	}
	return ""
}

// RetryAfterOf returns the Retry-After seconds carried by err, or 0.
func RetryAfterOf(err error) int {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.RetryAfter
	}
	return 0
}

// Is reports whether err carries a fault of kind k.
func Is(err error, k Kind) bool {
	return err != nil && KindOf(err) == k
}
