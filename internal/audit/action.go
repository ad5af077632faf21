package audit

import "fmt"

// Action is one of the twelve stable action strings of docs/PROTOCOL.md §13.3. They
// appear in the hash and in the action column and never change.
type Action string

// The actions. MediaUploaded is never written (no media in scope); it exists
// so that parsing and verification know it.
const (
	EventCreated      Action = "event_created"
	EventDeleted      Action = "event_deleted"
	ChannelCreated    Action = "channel_created"
	ChannelUpdated    Action = "channel_updated"
	ChannelDeleted    Action = "channel_deleted"
	MemberAdded       Action = "member_added"
	MemberRemoved     Action = "member_removed"
	AuthSuccess       Action = "auth_success"
	AuthFailure       Action = "auth_failure"
	RateLimitExceeded Action = "rate_limit_exceeded"
	MediaUploaded     Action = "media_uploaded"
	CommunityImported Action = "community_imported"
)

// Actions lists every known action in the order of docs/PROTOCOL.md §13.3.
var Actions = []Action{EventCreated, EventDeleted, ChannelCreated, ChannelUpdated, ChannelDeleted,
	MemberAdded, MemberRemoved, AuthSuccess, AuthFailure, RateLimitExceeded, MediaUploaded, CommunityImported}

// ParseAction returns the Action spelled s, or an error
// `unknown audit action: "<s>"`.
func ParseAction(s string) (Action, error) {
	for _, a := range Actions {
		if string(a) == s {
			return a, nil
		}
	}
	return "", fmt.Errorf("unknown audit action: %q", s)
}

// Known reports whether a is one of the twelve actions.
func (a Action) Known() bool {
	_, err := ParseAction(string(a))
	return err == nil
}
