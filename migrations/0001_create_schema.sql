-- Tables, wallets, seats, hands, the ledger and state transitions.
-- Chips are BIGINT and never negative; every chip movement has a ledger row.

CREATE TABLE tables (
    id                  TEXT PRIMARY KEY,
    environment         TEXT NOT NULL,
    state               TEXT NOT NULL DEFAULT 'open'
        CHECK (state IN ('open', 'draining', 'released', 'frozen', 'escape', 'custody', 'closed')),
    state_reason        TEXT,
    config              JSONB NOT NULL,
    owner_instance      TEXT,
    owner_fencing_token BIGINT NOT NULL DEFAULT 0 CHECK (owner_fencing_token >= 0),
    hand_no             BIGINT NOT NULL DEFAULT 0 CHECK (hand_no >= 0),
    button              SMALLINT,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX tables_environment_state ON tables (environment, state);

CREATE TABLE accounts (
    player     TEXT PRIMARY KEY,
    balance    BIGINT NOT NULL DEFAULT 0 CHECK (balance >= 0),
    granted    BIGINT NOT NULL DEFAULT 0 CHECK (granted >= 0),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE seats (
    table_id  TEXT NOT NULL REFERENCES tables (id),
    seat      SMALLINT NOT NULL CHECK (seat >= 0),
    player    TEXT NOT NULL REFERENCES accounts (player),
    stack     BIGINT NOT NULL CHECK (stack >= 0),
    seated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, seat),
    UNIQUE (table_id, player)
);

CREATE TABLE hands (
    table_id   TEXT NOT NULL REFERENCES tables (id),
    hand_no    BIGINT NOT NULL,
    fence      BIGINT NOT NULL,
    owner      TEXT NOT NULL,
    result     JSONB NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, hand_no)
);

-- wallet_delta moves a player's wallet, stack_delta their stack at table_id.
CREATE TABLE ledger (
    id           BIGSERIAL PRIMARY KEY,
    at           TIMESTAMPTZ NOT NULL DEFAULT now(),
    kind         TEXT NOT NULL CHECK (kind IN ('grant', 'buy_in', 'cash_out', 'hand', 'custody')),
    player       TEXT NOT NULL,
    table_id     TEXT,
    hand_no      BIGINT,
    fence        BIGINT,
    wallet_delta BIGINT NOT NULL DEFAULT 0,
    stack_delta  BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX ledger_table ON ledger (table_id, hand_no);
CREATE INDEX ledger_player ON ledger (player);

CREATE TABLE table_events (
    id         BIGSERIAL PRIMARY KEY,
    table_id   TEXT NOT NULL REFERENCES tables (id),
    at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    from_state TEXT,
    to_state   TEXT NOT NULL,
    reason     TEXT,
    owner      TEXT,
    fence      BIGINT
);
CREATE INDEX table_events_table ON table_events (table_id, id);
