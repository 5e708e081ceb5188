-- keygate schema, version 6: the KV engine's secrets.
--
-- One row per secret path and one row per version's value, so that a
-- write adds a row and a read of one version reads one row. sealed is the
-- engine's metadata (custom metadata, settings, each version's times) or
-- value, sealed under the tenant's data key: opaque here. current_version
-- and oldest_version are the versions the path holds (0: none); revision
-- counts its writes, for nodes writing it optimistically. A tenant with
-- secrets is not deleted (the foreign key); its mount configuration goes
-- with it.

CREATE TABLE secrets (
	tenant          TEXT    NOT NULL REFERENCES tenants (name),
	path            TEXT    NOT NULL CHECK (path <> ''),
	sealed          BLOB    NOT NULL CHECK (length(sealed) > 0),
	current_version INTEGER NOT NULL CHECK (current_version >= 0),
	oldest_version  INTEGER NOT NULL CHECK (oldest_version >= 0),
	revision        INTEGER NOT NULL CHECK (revision >= 1),
	created_at      INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL,
	PRIMARY KEY (tenant, path)
) STRICT, WITHOUT ROWID;

CREATE TABLE secret_values (
	tenant     TEXT    NOT NULL,
	path       TEXT    NOT NULL,
	version    INTEGER NOT NULL CHECK (version >= 1),
	sealed     BLOB    NOT NULL CHECK (length(sealed) > 0),
	created_at INTEGER NOT NULL,
	PRIMARY KEY (tenant, path, version),
	FOREIGN KEY (tenant, path) REFERENCES secrets (tenant, path) ON DELETE CASCADE
) STRICT;

CREATE TABLE secret_configs (
	tenant TEXT NOT NULL PRIMARY KEY REFERENCES tenants (name) ON DELETE CASCADE,
	config BLOB NOT NULL CHECK (length(config) > 0)
) STRICT;
