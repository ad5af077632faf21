package wire

import "strconv"

// Refusals of per-user admission (docs/OPERATIONS.md "Running a public
// relay", "Per-user quotas").

// QuotaExceeded is the refusal of a request past one of its sender's
// quotas: an OK false or CLOSED text, and the error of an HTTP 429. retry is
// the seconds until the quota's window ends; less than 1 is written as 1.
func QuotaExceeded(retry int) string {
	return RateLimited + ": quota exceeded; retry in " + strconv.Itoa(max(retry, 1)) + "s"
}

// TooManyPTags refuses an event with n p tags when at most limit are
// accepted.
func TooManyPTags(n, limit int) string {
	return Invalid + ": too many p tags (" + strconv.Itoa(n) + ", maximum " + strconv.Itoa(limit) + ")"
}
