package pg

// Exported for tests in package pg_test.
var (
	CheckSequence  = checkSequence
	LoadMigrations = loadMigrations
)
