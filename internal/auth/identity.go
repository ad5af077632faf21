package auth

import "context"

// Identity is the authenticated principal of a request or connection.
type Identity struct {
	// Pubkey is the signer's public key, 64 lowercase hex characters.
	Pubkey string
}

type identityKey struct{}

// WithIdentity returns a copy of ctx that carries id. A later call replaces
// the identity for the derived context only.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the identity stored by WithIdentity, and false when
// ctx carries none (an unauthenticated request).
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}
