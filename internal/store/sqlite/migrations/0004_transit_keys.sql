-- keygate schema, version 4: transit keys.
--
-- One row per key and one row per version of it, so that a rotation adds a
-- row and a read of one version reads one row. latest is the newest
-- version and min_available the oldest kept (those below were trimmed);
-- revision counts the key's changes, for nodes updating it optimistically.
-- config is the transit engine's JSON, kept as opaque bytes.

CREATE TABLE transit_keys (
	tenant        TEXT    NOT NULL REFERENCES tenants (name),
	name          TEXT    NOT NULL CHECK (name <> ''),
	type          TEXT    NOT NULL CHECK (type <> ''),
	config        BLOB    NOT NULL,
	latest        INTEGER NOT NULL,
	min_available INTEGER NOT NULL,
	revision      INTEGER NOT NULL,
	created_at    INTEGER NOT NULL,
	updated_at    INTEGER NOT NULL,
	PRIMARY KEY (tenant, name),
	CHECK (1 <= min_available AND min_available <= latest)
) STRICT;

CREATE TABLE transit_key_versions (
	tenant     TEXT    NOT NULL,
	name       TEXT    NOT NULL,
	version    INTEGER NOT NULL CHECK (version >= 1),
	sealed     BLOB    NOT NULL CHECK (length(sealed) > 0),
	created_at INTEGER NOT NULL,
	PRIMARY KEY (tenant, name, version),
	FOREIGN KEY (tenant, name) REFERENCES transit_keys (tenant, name) ON DELETE CASCADE
) STRICT, WITHOUT ROWID;
