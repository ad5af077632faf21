package pgcluster

// MemoryLimit exposes memoryLimit to the external tests.
var MemoryLimit = memoryLimit

// HugePagesNote exposes hugePagesNote to the external tests.
var HugePagesNote = hugePagesNote
