-- keygate schema, version 5: the audit log.
--
-- One row per record; each node numbers its own, and the primary key keeps
-- a (node, seq) from being written twice. line is one JSON record, opaque
-- to the store (bytea: jsonb would not give it back byte for byte, and the
-- records are hash-chained). Node names sort byte by byte, as in SQLite.

CREATE TABLE audit_log (
	node text   COLLATE "C" NOT NULL CHECK (node <> ''),
	seq  bigint NOT NULL CHECK (seq >= 0),
	line bytea  NOT NULL CHECK (octet_length(line) > 0),
	PRIMARY KEY (node, seq)
);
