-- keygate schema, version 6: the KV engine's secrets.
--
-- One row per secret path and one row per version's value, so that a
-- write adds a row and a read of one version reads one row. sealed is the
-- engine's metadata (custom metadata, settings, each version's times) or
-- value, sealed under the tenant's data key: opaque here. current_version
-- and oldest_version are the versions the path holds (0: none); revision
-- counts its writes, for nodes writing it optimistically. A tenant with
-- secrets is not deleted (the foreign key); its mount configuration goes
-- with it. Paths sort byte by byte, as in SQLite.

CREATE TABLE secrets (
	tenant          text        COLLATE "C" NOT NULL REFERENCES tenants (name),
	path            text        COLLATE "C" NOT NULL CHECK (path <> ''),
	sealed          bytea       NOT NULL CHECK (octet_length(sealed) > 0),
	current_version bigint      NOT NULL CHECK (current_version >= 0),
	oldest_version  bigint      NOT NULL CHECK (oldest_version >= 0),
	revision        bigint      NOT NULL CHECK (revision >= 1),
	created_at      timestamptz NOT NULL,
	updated_at      timestamptz NOT NULL,
	PRIMARY KEY (tenant, path)
);

CREATE TABLE secret_values (
	tenant     text        COLLATE "C" NOT NULL,
	path       text        COLLATE "C" NOT NULL,
	version    bigint      NOT NULL CHECK (version >= 1),
	sealed     bytea       NOT NULL CHECK (octet_length(sealed) > 0),
	created_at timestamptz NOT NULL,
	PRIMARY KEY (tenant, path, version),
	FOREIGN KEY (tenant, path) REFERENCES secrets (tenant, path) ON DELETE CASCADE
);

CREATE TABLE secret_configs (
	tenant text  COLLATE "C" NOT NULL PRIMARY KEY REFERENCES tenants (name) ON DELETE CASCADE,
	config bytea NOT NULL CHECK (octet_length(config) > 0)
);
