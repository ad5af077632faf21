package store

import (
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/buzz-relay/buzz/internal/eventtest"
)

// BenchmarkBatchParams is the relay's side of one group commit of six
// kind 9 events in a channel, each mentioning one pubkey, without the
// round trip: the column arrays built (batchArgs) and encoded as pgx
// encodes the statement's parameters.
func BenchmarkBatchParams(b *testing.B) {
	community, channel := uuid.NewString(), uuid.NewString()
	key := eventtest.NewKey()
	ps := make([]EventInsertParams, 6)
	for i := range ps {
		ev := key.Signed(b, 9, eventtest.Content("a message of some length, like the ones a team writes"),
			eventtest.Tag("h", channel), eventtest.Tag("p", eventtest.NewKey().PubKey))
		ps[i] = EventInsertParams{CommunityID: community, Event: &ev, Channel: channel}
	}
	oids := []uint32{pgtype.UUIDArrayOID, pgtype.ByteaArrayOID, pgtype.ByteaArrayOID, pgtype.Int8ArrayOID, pgtype.Int4ArrayOID,
		pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.ByteaArrayOID, pgtype.UUIDArrayOID, pgtype.TextArrayOID,
		pgtype.TextArrayOID, pgtype.TextArrayOID, pgtype.ByteaArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID,
		pgtype.UUIDArrayOID, pgtype.ByteaArrayOID, pgtype.TextArrayOID, pgtype.UUIDArrayOID, pgtype.ByteaArrayOID,
		pgtype.ByteaArrayOID, pgtype.Int8ArrayOID, pgtype.BoolArrayOID}
	sd := &pgconn.StatementDescription{SQL: eventBatchSQL, ParamOIDs: oids}
	m := pgtype.NewMap()
	var eqb pgx.ExtendedQueryBuilder
	b.ReportAllocs()
	for b.Loop() {
		var args batchArgs
		for _, p := range ps {
			if err := args.add(p); err != nil {
				b.Fatal(err)
			}
		}
		if err := eqb.Build(m, sd, args.values()); err != nil {
			b.Fatal(err)
		}
	}
}
