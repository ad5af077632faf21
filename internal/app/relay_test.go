package app

import (
	"reflect"
	"testing"
)

// The relay's parts are built once by Start and never replaced: no caller
// may reach in and set one, so Relay has no exported field. Callers outside
// use its methods (docs/ARCHITECTURE.md "Composition root").
func TestRelayHasNoExportedField(t *testing.T) {
	t.Parallel()
	rt := reflect.TypeFor[Relay]()
	for i := range rt.NumField() {
		if f := rt.Field(i); f.IsExported() {
			t.Errorf("app.Relay.%s is exported; keep the part unexported and add a method if callers need it", f.Name)
		}
	}
}
