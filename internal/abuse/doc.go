// Package abuse holds the attacks of docs/PERFORMANCE.md "Abuse benchmark":
// small functions, each bounded in count and time, that one attacker key
// runs against one community over real sockets (loopback only), counting
// what the relay answered by reason prefix. cmd/buzz-bench runs them next
// to honest clients in another community and compares the honest
// latencies with and without each attack; internal/soak (buzz-bench soak)
// runs them as its "abuse" fault under the ledgered load.
//
// The attacks work against any relay: an undefended one simply accepts
// more and costs more, a defended one refuses with its prefixed reasons.
// A refusal, a CLOSED, a dropped connection or a timeout is an outcome to
// count, never an error of the tool.
//
// It does NOT judge the figures, start a relay, or reach a non-loopback
// host: the callers check the URL.
package abuse
