package metrics

import "strconv"

// acceptedKinds are the kinds of docs/PROTOCOL.md §4.1 that the relay accepts from
// clients, plus the relay-signed kinds; each is its own kind label value.
var acceptedKinds = []int{
	0, 1, 3, 5, 7, 9, 1059,
	9000, 9001, 9002, 9005, 9007, 9008, 9021, 9022,
	10000, 10001, 10002, 10003, 10030, 10100,
	20001, 20002,
	30000, 30003, 30023, 30030, 30078, 30174, 30315,
	40002, 40003, 45001, 45002, 45003,
	39000, 39001, 39002, 44100, 44101, // relay-signed
}

var verbatim = func() map[int]string {
	m := make(map[int]string, len(acceptedKinds))
	for _, k := range acceptedKinds {
		m[k] = strconv.Itoa(k)
	}
	return m
}()

// KindLabel returns the bounded value of the kind label (docs/PROTOCOL.md §11.2): the
// decimal kind for an accepted or relay-signed kind and for 20001 and 20002,
// "ephemeral" for any other kind in 20000–29999, and "other" for anything
// else, negative or unknown. It never allocates for an accepted kind.
func KindLabel(kind int) string {
	if s, ok := verbatim[kind]; ok {
		return s
	}
	if kind >= 20000 && kind <= 29999 {
		return "ephemeral"
	}
	return "other"
}

// kindLabels lists every value KindLabel can return.
func kindLabels() []string {
	out := make([]string, 0, len(acceptedKinds)+2)
	for _, k := range acceptedKinds {
		out = append(out, verbatim[k])
	}
	return append(out, "ephemeral", "other")
}
