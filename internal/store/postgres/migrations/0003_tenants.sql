-- keygate schema, version 3: tenants.
--
-- Clients and users belong to a tenant; the 'default' tenant always exists,
-- and every client and user stored before this version is its. A username
-- is unique within its tenant. data_key is the tenant's data key sealed by
-- the keyring, NULL until set. Tenant names are checked by the store
-- (store.ValidTenantName) before they reach SQL. Names compare and sort
-- byte by byte (COLLATE "C"), as in SQLite, whatever the database's
-- collation. The DEFAULTs only fill the rows already there; every insert
-- names the column.

CREATE TABLE tenants (
	name       text        COLLATE "C" NOT NULL PRIMARY KEY CHECK (name <> ''),
	data_key   bytea       CHECK (data_key IS NULL OR octet_length(data_key) > 0),
	created_at timestamptz NOT NULL
);
INSERT INTO tenants (name, data_key, created_at) VALUES ('default', NULL, now());

ALTER TABLE clients ADD COLUMN tenant text COLLATE "C" NOT NULL DEFAULT 'default' REFERENCES tenants (name);
ALTER TABLE clients ALTER COLUMN tenant DROP DEFAULT;
CREATE INDEX clients_tenant_idx ON clients (tenant, created_at, id);

ALTER TABLE users ADD COLUMN tenant text COLLATE "C" NOT NULL DEFAULT 'default' REFERENCES tenants (name);
ALTER TABLE users ALTER COLUMN tenant DROP DEFAULT;
ALTER TABLE users DROP CONSTRAINT users_username_key;
ALTER TABLE users ADD CONSTRAINT users_tenant_username_key UNIQUE (tenant, username);
CREATE INDEX users_tenant_idx ON users (tenant, created_at, id);
