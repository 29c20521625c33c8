-- The journal of commands (I15): each command a table applies, committed
-- under the table's fence before any event it produced is told. The state
-- at the last boundary plus the journal since then is the game in progress.
--
-- `number` is the boundary number of the hand (or game) the command belongs
-- to (hold'em's hand_no), `seq` its place in it (0 for the start). A hand
-- dealt again under a newer fence (after an owner change that did not
-- resume it) starts again at seq 0 under that fence, so `fence` is part of
-- the key. `seed` (start rows only) decides the hand's randomness: it is
-- read by the server alone, never sent to a client or logged.
CREATE TABLE journal (
    table_id TEXT NOT NULL REFERENCES tables (id),
    number   BIGINT NOT NULL CHECK (number >= 0),
    fence    BIGINT NOT NULL CHECK (fence >= 0),
    seq      INTEGER NOT NULL CHECK (seq >= 0),
    kind     TEXT NOT NULL CHECK (kind IN ('start', 'act', 'timeout', 'leave')),
    seat     SMALLINT CHECK (seat >= 0),
    decision BIGINT CHECK (decision >= 0),
    command  JSONB,
    seed     BYTEA CHECK (seed IS NULL OR kind = 'start'),
    at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, number, fence, seq)
);
