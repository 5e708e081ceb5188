-- keygate schema, version 2: a refresh family's origin.
--
-- origin_at is when the token's family began (the login), carried forward
-- by every rotation; subject revocations are compared with it (a rotation
-- reads the subject's by the primary key of revocations, (issuer, jti '',
-- subject), so it needs no index). A token
-- stored before this version gets the earliest issued_at its family still
-- has in the table: at most its own issued_at, and the login's when that
-- row is still kept, so that a token rotated past a revocation before the
-- upgrade is caught too. The DEFAULT only satisfies ALTER TABLE; every
-- insert names the column.
ALTER TABLE refresh_tokens ADD COLUMN origin_at INTEGER NOT NULL DEFAULT 0;
UPDATE refresh_tokens SET origin_at = (
	SELECT min(f.issued_at) FROM refresh_tokens AS f WHERE f.family_id = refresh_tokens.family_id);
