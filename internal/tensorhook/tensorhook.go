// Package tensorhook holds the hook through which package tensor lends a tensor's
// backend and storage to this module's own packages (through internal/tensorx) without
// exporting them. tensor sets it in its init; nothing else may set it.
package tensorhook

import "github.com/gamp-ml/gamp/backend"

// Dense is set by package tensor. t is a *tensor.Tensor; Dense panics as any tensor op
// named op does when t was released, and returns t's backend and storage with ok true
// when t is dense and starts its storage. When it is not, Dense returns ok false, or
// panics with tensor's OpError naming op if must is set.
var Dense func(t any, op string, must bool) (b backend.Backend, s backend.Storage, ok bool)
