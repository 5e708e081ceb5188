-- keygate schema, version 8: the state of each tenant's data-key rotation.
--
-- One row per tenant that had a rotation, shared by every node: the
-- rotation's state as JSON (the version rotated to, the progress, the
-- node rewrapping and its lease), written with compare-and-swap on
-- revision. It goes with its tenant.

CREATE TABLE tenant_rekeys (
	tenant   text   COLLATE "C" NOT NULL PRIMARY KEY REFERENCES tenants (name) ON DELETE CASCADE,
	revision bigint NOT NULL CHECK (revision >= 1),
	body     bytea  NOT NULL CHECK (octet_length(body) > 0)
);
