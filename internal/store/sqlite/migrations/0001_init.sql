-- keygate schema, version 1.
-- Times are INTEGER microseconds since the Unix epoch (UTC); NULL means unset.
-- Scopes are JSON arrays of strings, in TEXT.

CREATE TABLE clients (
	id            TEXT    NOT NULL PRIMARY KEY CHECK (id <> ''),
	name          TEXT    NOT NULL,
	secret_digest BLOB    NOT NULL,
	scopes        TEXT    NOT NULL CHECK (json_type(scopes) = 'array'),
	created_at    INTEGER NOT NULL,
	updated_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX clients_created_at_idx ON clients (created_at, id);

CREATE TABLE users (
	id            TEXT    NOT NULL PRIMARY KEY CHECK (id <> ''),
	username      TEXT    NOT NULL UNIQUE CHECK (username <> ''),
	password_hash TEXT    NOT NULL,
	scopes        TEXT    NOT NULL CHECK (json_type(scopes) = 'array'),
	disabled      INTEGER NOT NULL CHECK (disabled IN (0, 1)),
	created_at    INTEGER NOT NULL,
	updated_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX users_created_at_idx ON users (created_at, id);

CREATE TABLE signing_keys (
	kid        TEXT    NOT NULL PRIMARY KEY CHECK (kid <> ''),
	alg        TEXT    NOT NULL CHECK (alg <> ''),
	sealed     BLOB    NOT NULL,
	public_jwk BLOB    NOT NULL,
	publish_at INTEGER NOT NULL,
	active_at  INTEGER NOT NULL,
	retire_at  INTEGER,
	created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX signing_keys_created_at_idx ON signing_keys (created_at, kid);

-- generation is 0 for the token that starts a family and n+1 for the token
-- rotated from generation n: UNIQUE (family_id, generation) lets a family
-- start only once and each token have at most one successor.
CREATE TABLE refresh_tokens (
	digest     BLOB    NOT NULL PRIMARY KEY CHECK (length(digest) > 0),
	family_id  TEXT    NOT NULL CHECK (family_id <> ''),
	generation INTEGER NOT NULL CHECK (generation >= 0),
	client_id  TEXT    NOT NULL,
	subject    TEXT    NOT NULL,
	scopes     TEXT    NOT NULL CHECK (json_type(scopes) = 'array'),
	issued_at  INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	used_at    INTEGER,
	revoked    INTEGER NOT NULL CHECK (revoked IN (0, 1)),
	UNIQUE (family_id, generation)
) STRICT, WITHOUT ROWID;
CREATE INDEX refresh_tokens_expires_at_idx ON refresh_tokens (expires_at);

-- One row per revoked jti (subject '') or revoked subject (jti ''), per issuer.
CREATE TABLE revocations (
	issuer     TEXT    NOT NULL,
	jti        TEXT    NOT NULL,
	subject    TEXT    NOT NULL,
	until_at   INTEGER,
	before_at  INTEGER,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (issuer, jti, subject),
	CHECK ((jti = '') <> (subject = '')),
	CHECK (jti = '' OR until_at IS NOT NULL),
	CHECK (subject = '' OR before_at IS NOT NULL)
) STRICT, WITHOUT ROWID;
CREATE INDEX revocations_created_at_idx ON revocations (created_at);
