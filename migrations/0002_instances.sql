-- Liveness of every process of an environment, beside the Redis
-- registration: Redis can lose a lease and a registration at once, so an
-- absent key alone never proves that an owner stopped (the takeover rule).
CREATE TABLE instances (
    environment   TEXT NOT NULL,
    id            TEXT NOT NULL,
    incarnation   TEXT NOT NULL,
    advertise_url TEXT NOT NULL,
    started_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_seen     TIMESTAMPTZ NOT NULL DEFAULT now(),
    draining      BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (environment, id)
);
