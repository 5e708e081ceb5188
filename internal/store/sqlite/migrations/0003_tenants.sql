-- keygate schema, version 3: tenants.
--
-- Clients and users belong to a tenant; the 'default' tenant always exists,
-- and every client and user stored before this version is its. A username
-- is unique within its tenant. data_key is the tenant's data key sealed by
-- the keyring, NULL until set. Tenant names are checked by the store
-- (store.ValidTenantName) before they reach SQL.
--
-- SQLite can neither drop the old UNIQUE (username) nor add a column that
-- REFERENCES another table with a default, so clients and users are
-- rebuilt: a new table, the rows copied into 'default', the old one
-- dropped (nothing references it) and the new one renamed.

CREATE TABLE tenants (
	name       TEXT    NOT NULL PRIMARY KEY CHECK (name <> ''),
	data_key   BLOB    CHECK (data_key IS NULL OR length(data_key) > 0),
	created_at INTEGER NOT NULL
) STRICT;
INSERT INTO tenants (name, data_key, created_at) VALUES ('default', NULL, CAST(unixepoch('subsec') * 1000000 AS INTEGER));

CREATE TABLE clients_v3 (
	id            TEXT    NOT NULL PRIMARY KEY CHECK (id <> ''),
	tenant        TEXT    NOT NULL REFERENCES tenants (name),
	name          TEXT    NOT NULL,
	secret_digest BLOB    NOT NULL,
	scopes        TEXT    NOT NULL CHECK (json_type(scopes) = 'array'),
	created_at    INTEGER NOT NULL,
	updated_at    INTEGER NOT NULL
) STRICT;
INSERT INTO clients_v3 (id, tenant, name, secret_digest, scopes, created_at, updated_at)
	SELECT id, 'default', name, secret_digest, scopes, created_at, updated_at FROM clients;
DROP TABLE clients;
ALTER TABLE clients_v3 RENAME TO clients;
CREATE INDEX clients_created_at_idx ON clients (created_at, id);
CREATE INDEX clients_tenant_idx ON clients (tenant, created_at, id);

CREATE TABLE users_v3 (
	id            TEXT    NOT NULL PRIMARY KEY CHECK (id <> ''),
	tenant        TEXT    NOT NULL REFERENCES tenants (name),
	username      TEXT    NOT NULL CHECK (username <> ''),
	password_hash TEXT    NOT NULL,
	scopes        TEXT    NOT NULL CHECK (json_type(scopes) = 'array'),
	disabled      INTEGER NOT NULL CHECK (disabled IN (0, 1)),
	created_at    INTEGER NOT NULL,
	updated_at    INTEGER NOT NULL,
	UNIQUE (tenant, username)
) STRICT;
INSERT INTO users_v3 (id, tenant, username, password_hash, scopes, disabled, created_at, updated_at)
	SELECT id, 'default', username, password_hash, scopes, disabled, created_at, updated_at FROM users;
DROP TABLE users;
ALTER TABLE users_v3 RENAME TO users;
CREATE INDEX users_created_at_idx ON users (created_at, id);
CREATE INDEX users_tenant_idx ON users (tenant, created_at, id);
