-- 0001_core: the relay core schema (spec 10 §3.2) with the search column of
-- spec 20 §2.1. Applied files never change: add a new file instead.

-- Enum types: their names and values are part of the contract.
CREATE TYPE channel_type AS ENUM ('stream', 'forum', 'dm', 'workflow');
CREATE TYPE channel_visibility AS ENUM ('open', 'private');
CREATE TYPE member_role AS ENUM ('owner', 'admin', 'member', 'guest', 'bot');
CREATE TYPE channel_add_policy AS ENUM ('anyone', 'owner_only', 'nobody');

-- Tables that are not tenant-scoped, or are keyed by a deployment-wide value.
-- Every other table has community_id leading all of its keys.
CREATE TABLE _operator_global_tables (
    table_name TEXT PRIMARY KEY,
    reason     TEXT NOT NULL
);

INSERT INTO _operator_global_tables (table_name, reason) VALUES
    ('communities', 'the tenant registry itself'),
    ('community_host_aliases', 'host names are unique across communities'),
    ('buzz_schema_migrations', 'the migration ledger of the whole database'),
    ('_operator_global_tables', 'this registry');

-- communities: operator-global; the tenant registry.
CREATE TABLE communities (
    id         UUID PRIMARY KEY DEFAULT gen_random_uuid()
               CHECK (id <> '00000000-0000-0000-0000-000000000000'),
    host       VARCHAR(255) NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX idx_communities_host ON communities (lower(host));

-- community_host_aliases: operator-global; extra host names of a community.
CREATE TABLE community_host_aliases (
    host         VARCHAR(255) PRIMARY KEY,
    community_id UUID NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE UNIQUE INDEX idx_community_host_aliases_host ON community_host_aliases (lower(host));
CREATE INDEX idx_community_host_aliases_community ON community_host_aliases (community_id);

-- relay_members: the per-community allowlist (spec 10 §2.5).
CREATE TABLE relay_members (
    community_id UUID NOT NULL REFERENCES communities (id),
    pubkey       TEXT NOT NULL,
    role         TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    added_by     TEXT,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, pubkey)
);

CREATE INDEX idx_relay_members_role ON relay_members (community_id, role);

-- users: per-community facts about a pubkey.
CREATE TABLE users (
    community_id       UUID NOT NULL REFERENCES communities (id),
    pubkey             BYTEA NOT NULL CHECK (length(pubkey) = 32),
    nip05_handle       VARCHAR(255),
    channel_add_policy channel_add_policy NOT NULL DEFAULT 'anyone',
    agent_owner_pubkey BYTEA,
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, pubkey)
);

CREATE UNIQUE INDEX idx_users_nip05_handle ON users (community_id, lower(nip05_handle))
    WHERE nip05_handle IS NOT NULL;

-- channels: NIP-29 groups; id is the wire id (the h tag).
CREATE TABLE channels (
    id             UUID NOT NULL CHECK (id <> '00000000-0000-0000-0000-000000000000'),
    community_id   UUID NOT NULL REFERENCES communities (id),
    name           VARCHAR(255) NOT NULL,
    channel_type   channel_type NOT NULL DEFAULT 'stream',
    visibility     channel_visibility NOT NULL DEFAULT 'open',
    description    TEXT,
    created_by     BYTEA NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    archived_at    TIMESTAMPTZ,
    deleted_at     TIMESTAMPTZ,
    topic          TEXT,
    topic_set_by   BYTEA,
    topic_set_at   TIMESTAMPTZ,
    purpose        TEXT,
    purpose_set_by BYTEA,
    purpose_set_at TIMESTAMPTZ,
    PRIMARY KEY (community_id, id)
);

CREATE INDEX idx_channels_community_type ON channels (community_id, channel_type);
CREATE INDEX idx_channels_community_visibility ON channels (community_id, visibility);
CREATE INDEX idx_channels_created_by ON channels (community_id, created_by);

-- A channel can never move to another community.
CREATE FUNCTION buzz_channels_community_id_immutable() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.community_id IS DISTINCT FROM OLD.community_id THEN
        RAISE EXCEPTION 'channels.community_id is immutable (channel % cannot be re-tenanted)', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER trg_channels_community_id_immutable
    BEFORE UPDATE OF community_id ON channels
    FOR EACH ROW EXECUTE FUNCTION buzz_channels_community_id_immutable();

-- channel_members: membership with soft removal.
CREATE TABLE channel_members (
    community_id UUID NOT NULL REFERENCES communities (id),
    channel_id   UUID NOT NULL,
    pubkey       BYTEA NOT NULL,
    role         member_role NOT NULL DEFAULT 'member',
    joined_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    invited_by   BYTEA,
    removed_at   TIMESTAMPTZ,
    removed_by   BYTEA,
    PRIMARY KEY (community_id, channel_id, pubkey),
    FOREIGN KEY (community_id, channel_id) REFERENCES channels (community_id, id) ON DELETE CASCADE
);

CREATE INDEX idx_channel_members_pubkey ON channel_members (community_id, pubkey)
    WHERE removed_at IS NULL;

-- events: the event log, partitioned by month on created_at. Monthly
-- partitions events_pYYYY_MM are created at runtime (spec 10 §3.3).
CREATE TABLE events (
    community_id UUID NOT NULL REFERENCES communities (id),
    id           BYTEA NOT NULL CHECK (length(id) = 32),
    pubkey       BYTEA NOT NULL CHECK (length(pubkey) = 32),
    created_at   TIMESTAMPTZ NOT NULL,
    kind         INT NOT NULL CONSTRAINT events_kind_check
                 CHECK (kind <> 22242 AND (kind < 20000 OR kind > 29999)),
    tags         JSONB NOT NULL,
    content      TEXT NOT NULL,
    sig          BYTEA NOT NULL CHECK (length(sig) = 64),
    received_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    channel_id   UUID,
    deleted_at   TIMESTAMPTZ,
    d_tag        TEXT CONSTRAINT events_d_tag_check
                 CHECK (d_tag IS NULL OR (kind BETWEEN 30000 AND 39999 AND octet_length(d_tag) <= 1024)),
    search_tsv TSVECTOR GENERATED ALWAYS AS (
      CASE WHEN kind IN (1059, 30174, 30179, 30300, 30350, 30622, 44100, 44101, 44200) THEN NULL::tsvector
           WHEN kind IN (0, 9, 40002, 45001, 45003) THEN to_tsvector('simple', content)
           ELSE NULL::tsvector
      END) STORED,
    PRIMARY KEY (community_id, created_at, id)
) PARTITION BY RANGE (created_at);

CREATE TABLE events_p_default PARTITION OF events DEFAULT;

-- Created on the parent, so every partition gets them.
CREATE INDEX idx_events_community_id ON events (community_id, id, created_at DESC);
CREATE INDEX idx_events_community_channel_created ON events (community_id, channel_id, created_at DESC, id);
CREATE INDEX idx_events_community_pubkey_kind_created ON events (community_id, pubkey, kind, created_at DESC, id);
CREATE INDEX idx_events_community_kind_created ON events (community_id, kind, created_at DESC, id);
CREATE INDEX idx_events_community_deleted ON events (community_id, deleted_at);
CREATE INDEX idx_events_addressable ON events (community_id, kind, pubkey, channel_id, deleted_at);
CREATE INDEX idx_events_parameterized ON events (community_id, kind, pubkey, d_tag, created_at DESC, id)
    WHERE d_tag IS NOT NULL AND deleted_at IS NULL;
CREATE INDEX idx_events_tags_gin ON events USING GIN (tags jsonb_path_ops);
CREATE INDEX idx_events_search_tsv ON events USING GIN (search_tsv);

-- event_mentions: the #p index.
CREATE TABLE event_mentions (
    community_id     UUID NOT NULL REFERENCES communities (id),
    pubkey_hex       VARCHAR(64) NOT NULL,
    event_id         BYTEA NOT NULL,
    event_created_at TIMESTAMPTZ NOT NULL,
    channel_id       UUID,
    event_kind       INT,
    PRIMARY KEY (community_id, pubkey_hex, event_id)
);

CREATE INDEX idx_event_mentions_pubkey_created
    ON event_mentions (community_id, pubkey_hex, event_created_at DESC);
CREATE INDEX idx_event_mentions_pubkey_kind_created
    ON event_mentions (community_id, pubkey_hex, event_kind, event_created_at DESC);
CREATE INDEX idx_event_mentions_community_event ON event_mentions (community_id, event_id);

-- thread_metadata: NIP-10 structure of channel conversations.
CREATE TABLE thread_metadata (
    community_id            UUID NOT NULL REFERENCES communities (id),
    event_created_at        TIMESTAMPTZ NOT NULL,
    event_id                BYTEA NOT NULL,
    channel_id              UUID NOT NULL,
    parent_event_id         BYTEA,
    parent_event_created_at TIMESTAMPTZ,
    root_event_id           BYTEA,
    root_event_created_at   TIMESTAMPTZ,
    depth                   INT NOT NULL DEFAULT 0,
    reply_count             INT NOT NULL DEFAULT 0,
    descendant_count        INT NOT NULL DEFAULT 0,
    last_reply_at           TIMESTAMPTZ,
    broadcast               BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (community_id, event_created_at, event_id),
    FOREIGN KEY (community_id, channel_id) REFERENCES channels (community_id, id) ON DELETE CASCADE
);

CREATE INDEX idx_thread_metadata_parent ON thread_metadata (community_id, parent_event_id);
CREATE INDEX idx_thread_metadata_root ON thread_metadata (community_id, root_event_id);
CREATE INDEX idx_thread_metadata_channel_depth ON thread_metadata (community_id, channel_id, depth, event_created_at);
CREATE INDEX idx_thread_metadata_event_id ON thread_metadata (community_id, event_id);

-- reactions: kind 7, one row per (target, reactor, emoji).
CREATE TABLE reactions (
    community_id      UUID NOT NULL REFERENCES communities (id),
    event_created_at  TIMESTAMPTZ NOT NULL,
    event_id          BYTEA NOT NULL,
    pubkey            BYTEA NOT NULL,
    emoji             VARCHAR(64) NOT NULL,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    removed_at        TIMESTAMPTZ,
    reaction_event_id BYTEA,
    PRIMARY KEY (community_id, event_created_at, event_id, pubkey, emoji)
);

CREATE INDEX idx_reactions_event ON reactions (community_id, event_id, event_created_at);
CREATE INDEX idx_reactions_pubkey ON reactions (community_id, pubkey);
CREATE UNIQUE INDEX idx_reactions_source_event ON reactions (community_id, reaction_event_id)
    WHERE reaction_event_id IS NOT NULL;

-- nip98_replay: single-use NIP-98 event ids, shared by all processes.
CREATE TABLE nip98_replay (
    community_id UUID NOT NULL REFERENCES communities (id),
    event_id     BYTEA NOT NULL,
    seen_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, event_id)
);

CREATE INDEX idx_nip98_replay_seen_at ON nip98_replay (seen_at);
