-- keygate schema, version 5: the audit log.
--
-- One row per record; each node numbers its own, and the primary key keeps
-- a (node, seq) from being written twice. line is one JSON record, opaque
-- to the store. Rows are a few hundred bytes, so the table keeps its rowid
-- (appends go to the end) beside the primary key's index.

CREATE TABLE audit_log (
	node TEXT    NOT NULL CHECK (node <> ''),
	seq  INTEGER NOT NULL CHECK (seq >= 0),
	line BLOB    NOT NULL CHECK (length(line) > 0),
	PRIMARY KEY (node, seq)
) STRICT;
