-- keygate schema, version 4: transit keys.
--
-- One row per key and one row per version of it, so that a rotation adds a
-- row and a read of one version reads one row. latest is the newest
-- version and min_available the oldest kept (those below were trimmed);
-- revision counts the key's changes, for nodes updating it optimistically.
-- config is the transit engine's JSON, kept as opaque bytes (jsonb would
-- not give them back as they were). Names sort byte by byte, as in SQLite.

CREATE TABLE transit_keys (
	tenant        text        COLLATE "C" NOT NULL REFERENCES tenants (name),
	name          text        COLLATE "C" NOT NULL CHECK (name <> ''),
	type          text        NOT NULL CHECK (type <> ''),
	config        bytea       NOT NULL,
	latest        bigint      NOT NULL,
	min_available bigint      NOT NULL,
	revision      bigint      NOT NULL,
	created_at    timestamptz NOT NULL,
	updated_at    timestamptz NOT NULL,
	PRIMARY KEY (tenant, name),
	CHECK (1 <= min_available AND min_available <= latest)
);

CREATE TABLE transit_key_versions (
	tenant     text        COLLATE "C" NOT NULL,
	name       text        COLLATE "C" NOT NULL,
	version    bigint      NOT NULL CHECK (version >= 1),
	sealed     bytea       NOT NULL CHECK (octet_length(sealed) > 0),
	created_at timestamptz NOT NULL,
	PRIMARY KEY (tenant, name, version),
	FOREIGN KEY (tenant, name) REFERENCES transit_keys (tenant, name) ON DELETE CASCADE
);
