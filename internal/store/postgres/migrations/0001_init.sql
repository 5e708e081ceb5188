-- keygate schema, version 1.
-- Times are timestamptz (microsecond precision); NULL means unset.
-- Scopes are JSON arrays of strings, in jsonb.

CREATE TABLE clients (
	id            text        NOT NULL PRIMARY KEY CHECK (id <> ''),
	name          text        NOT NULL,
	secret_digest bytea       NOT NULL,
	scopes        jsonb       NOT NULL CHECK (jsonb_typeof(scopes) = 'array'),
	created_at    timestamptz NOT NULL,
	updated_at    timestamptz NOT NULL
);
CREATE INDEX clients_created_at_idx ON clients (created_at, id);

CREATE TABLE users (
	id            text        NOT NULL PRIMARY KEY CHECK (id <> ''),
	username      text        NOT NULL UNIQUE CHECK (username <> ''),
	password_hash text        NOT NULL,
	scopes        jsonb       NOT NULL CHECK (jsonb_typeof(scopes) = 'array'),
	disabled      boolean     NOT NULL,
	created_at    timestamptz NOT NULL,
	updated_at    timestamptz NOT NULL
);
CREATE INDEX users_created_at_idx ON users (created_at, id);

CREATE TABLE signing_keys (
	kid        text        NOT NULL PRIMARY KEY CHECK (kid <> ''),
	alg        text        NOT NULL CHECK (alg <> ''),
	sealed     bytea       NOT NULL,
	public_jwk bytea       NOT NULL,
	publish_at timestamptz NOT NULL,
	active_at  timestamptz NOT NULL,
	retire_at  timestamptz,
	created_at timestamptz NOT NULL
);
CREATE INDEX signing_keys_created_at_idx ON signing_keys (created_at, kid);

-- generation is 0 for the token that starts a family and n+1 for the token
-- rotated from generation n: UNIQUE (family_id, generation) lets a family
-- start only once and each token have at most one successor.
CREATE TABLE refresh_tokens (
	digest     bytea       NOT NULL PRIMARY KEY CHECK (octet_length(digest) > 0),
	family_id  text        NOT NULL CHECK (family_id <> ''),
	generation integer     NOT NULL CHECK (generation >= 0),
	client_id  text        NOT NULL,
	subject    text        NOT NULL,
	scopes     jsonb       NOT NULL CHECK (jsonb_typeof(scopes) = 'array'),
	issued_at  timestamptz NOT NULL,
	expires_at timestamptz NOT NULL,
	used_at    timestamptz,
	revoked    boolean     NOT NULL,
	UNIQUE (family_id, generation)
);
CREATE INDEX refresh_tokens_expires_at_idx ON refresh_tokens (expires_at);

-- One row per revoked jti (subject '') or revoked subject (jti ''), per issuer.
CREATE TABLE revocations (
	issuer     text        NOT NULL,
	jti        text        NOT NULL,
	subject    text        NOT NULL,
	until_at   timestamptz,
	before_at  timestamptz,
	created_at timestamptz NOT NULL,
	PRIMARY KEY (issuer, jti, subject),
	CHECK ((jti = '') <> (subject = '')),
	CHECK (jti = '' OR until_at IS NOT NULL),
	CHECK (subject = '' OR before_at IS NOT NULL)
);
CREATE INDEX revocations_created_at_idx ON revocations (created_at);
