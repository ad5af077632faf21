package pgcluster

// MemoryLimit exposes memoryLimit to the external tests.
var MemoryLimit = memoryLimit
