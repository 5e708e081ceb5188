-- keygate schema, version 7: the state of a root-key rotation.
--
-- One row at most (id 1), shared by every node: the rotation's state as
-- JSON (which holds each root key sealed under the other while it runs),
-- written with compare-and-swap on revision.

CREATE TABLE rekey (
	id       INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
	revision INTEGER NOT NULL CHECK (revision >= 1),
	body     BLOB    NOT NULL CHECK (length(body) > 0)
) STRICT;
