// Package buzz_test holds the architecture test: the import graph of the
// module must follow the arrows of docs/ARCHITECTURE.md.
package buzz_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/buzz-relay/buzz/"

// may maps each internal package to the internal packages it may import.
// docs/ARCHITECTURE.md carries the same table with the reasons.
var may = map[string]string{
	"event":       "",
	"wire":        "event",
	"config":      "tenant",
	"pg":          "",
	"pgcluster":   "",
	"metrics":     "",
	"health":      "",
	"store":       "event pg",
	"audit":       "event pg service testsignal",
	"tenant":      "",
	"read":        "event hot metrics replica search store window wire",
	"hot":         "event metrics",
	"search":      "event pg",
	"auth":        "event tenant",
	"ingest":      "admission audit event metrics pg store tenant wire",
	"wsapi":       "admission auth config event ingest metrics negentropy pubsub read service tenant testsignal wire",
	"negentropy":  "",
	"httpapi":     "admission auth config event ingest metrics read tenant wire",
	"client":      "event wire",
	"abuse":       "client event wire",
	"app":         "admission audit auth config event health hot httpapi ingest listener maintenance metrics notify pg pgcluster pubsub read replica service store tenant wsapi",
	"dbtest":      "pg pgcluster",
	"eventtest":   "event",
	"logtest":     "",
	"fixture":     "event eventtest pg store",
	"relaytest":   "app auth config dbtest event eventtest store",
	"redistest":   "",
	"standbytest": "pg pgcluster",
	"e2e":         "",

	// command-line conventions shared by cmd/buzz and cmd/buzz-relay
	"cli": "",

	// background work: the service shape and its test signals
	"testsignal":  "",
	"service":     "",
	"maintenance": "pg service store testsignal",

	// scale-out: Redis pub/sub between processes, the read replica's proof
	"pubsub":  "event metrics service testsignal",
	"replica": "metrics pg service testsignal",

	// operator listeners: signed mention notifications, the delivery worker
	"notify":   "auth event",
	"listener": "event metrics notify pg service store testsignal",

	// per-user admission: quotas counted in Redis or in the process
	"admission": "metrics",

	// the benchmarks of buzz-bench: percentiles, the one loader, and the
	// benchmarks that start what they measure
	"benchstat":   "",
	"benchload":   "event pg store",
	"benchdata":   "benchload event pg store",
	"windowbench": "app benchload benchstat client config event pg pgcluster store window",
	"soak":        "abuse benchstat client event pgcluster",

	// `buzz-relay community export`: one community as a JSON lines file
	"export": "audit event store",

	// `buzz-relay community import`: an export file replayed through ingest
	"importer": "audit event export ingest store tenant wire",

	// NIP-CW windows (docs/NIP-CW.md), both modes, run by the read door
	"window": "event metrics pg replica store",
}

// pure packages import only the standard library and the Schnorr library.
var pure = map[string]bool{"event": true, "wire": true, "tenant": true}

func TestArrows(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		for _, imp := range fields[1:] {
			if why := broken(pkg, imp); why != "" {
				t.Errorf("%s imports %s: %s", pkg, imp, why)
			}
		}
	}
}

func broken(pkg, imp string) string {
	if strings.HasPrefix(imp, module+"cmd/") {
		return "nothing imports cmd/"
	}
	if !strings.HasPrefix(pkg, "internal/") {
		return "" // cmd/ and the module root may import any internal package
	}
	name := strings.TrimPrefix(pkg, "internal/")
	allowed, known := may[name]
	if !known {
		return "package missing from the arrows table"
	}
	if strings.HasPrefix(imp, module+"internal/") {
		dep := strings.TrimPrefix(imp, module+"internal/")
		for _, a := range strings.Fields(allowed) {
			if a == dep {
				return ""
			}
		}
		return "not in its arrows"
	}
	if pure[name] && strings.Contains(imp, ".") && !strings.HasPrefix(imp, "github.com/btcsuite/btcd/btcec/v2") {
		return "the core is pure: standard library and Schnorr only"
	}
	return ""
}
