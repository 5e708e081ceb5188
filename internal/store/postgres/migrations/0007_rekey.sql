-- keygate schema, version 7: the state of a root-key rotation.
--
-- One row at most (id 1), shared by every node: the rotation's state as
-- JSON (which holds each root key sealed under the other while it runs),
-- written with compare-and-swap on revision.

CREATE TABLE rekey (
	id       integer NOT NULL PRIMARY KEY CHECK (id = 1),
	revision bigint  NOT NULL CHECK (revision >= 1),
	body     bytea   NOT NULL CHECK (octet_length(body) > 0)
);
