//go:build ruleguard

// Package rules holds the project's own lint rules, run by gocritic's
// ruleguard checker (see .golangci.yml). The build tag keeps the file out
// of every build, vet and test; only go.mod's requirement on the dsl module
// (which ruleguard resolves with go list) ties it to the module.
package rules

import "github.com/quasilyte/go-ruleguard/dsl"

// reasonPrefix: only package wire spells the NIP-01 machine-readable reason
// prefixes. Anywhere else a refusal text comes from a wire constant
// (wire.MsgNotRelayMember) or builder (wire.Reason(wire.Invalid, "…")), so
// the spellings of docs/PROTOCOL.md §7.10 live in one file. Test files, comments and
// strings that merely contain a prefix further in are not checked.
//
// ruleguard cannot match "any string literal" on its own (a bare $s is
// refused as too general), so the patterns list every place a literal
// stands in this code: declarations, assignments, call arguments,
// composite literals, returns, comparisons and concatenations, case
// clauses, index, send and parentheses.
func reasonPrefix(m dsl.Matcher) {
	m.Match(
		`$*_ $*_ = $*_, $s, $*_`, // const and var specs, grouped or not
		`$*_ := $*_, $s, $*_`, `$*_ = $*_, $s, $*_`, `$_ += $s`,
		`$_($*_, $s, $*_)`,
		`$_{$*_, $s, $*_}`, `{$*_, $s, $*_}`, `$_: $s`, `$s: $_`,
		`return $*_, $s, $*_`,
		`$s + $_`, `$_ + $s`, `$_ == $s`, `$s == $_`, `$_ != $s`, `$s != $_`,
		`switch $_ { case $*_, $s, $*_: $*_ }`, `switch { case $*_, $s, $*_: $*_ }`,
		`$_[$s]`, `$_ <- $s`, `($s)`,
	).
		Where(m["s"].Node.Is(`BasicLit`) &&
			m["s"].Text.Matches("^[\"`](invalid|restricted|auth-required|blocked|rate-limited|error|duplicate):") &&
			!m.File().PkgPath.Matches(`/internal/wire$`) &&
			!m.File().Name.Matches(`_test\.go$`)).
		At(m["s"]).
		Report(`reason prefix spelled outside internal/wire: use a wire.Msg… constant or wire.Reason`)
}

// metricsNilCheck: a *metrics.Metrics is never nil — every component
// defaults Config.Metrics to metrics.Disabled() in its constructor — so no
// call site checks it.
func metricsNilCheck(m dsl.Matcher) {
	m.Import("github.com/buzz-relay/buzz/internal/metrics")
	m.Match(`$x != nil`).
		Where(m["x"].Type.Is(`*metrics.Metrics`) && !m.File().Name.Matches(`_test\.go$`)).
		Report(`*metrics.Metrics is never nil: default Config.Metrics to metrics.Disabled() in the constructor`)
}
