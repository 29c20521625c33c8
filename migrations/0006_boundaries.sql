-- Boundaries are the game's, not poker's: a hand's end, a game's end. The
-- rows hold'em wrote as `hands` become `boundaries` (the boundary's number,
-- the game's result as JSON), and `hands` stays readable as a view of them.
ALTER TABLE hands RENAME TO boundaries;
ALTER TABLE boundaries RENAME COLUMN hand_no TO number;
ALTER TABLE boundaries RENAME CONSTRAINT hands_pkey TO boundaries_pkey;
CREATE VIEW hands AS
    SELECT table_id, number AS hand_no, fence, owner, result, created_at FROM boundaries;

-- What a game keeps across boundaries besides seats and stacks (hold'em's
-- button), as the game records it. `button` stays readable, derived from it.
ALTER TABLE tables ADD COLUMN game_state JSONB NOT NULL DEFAULT 'null';
UPDATE tables SET game_state = jsonb_build_object('button', button) WHERE button IS NOT NULL;
ALTER TABLE tables DROP COLUMN button;
ALTER TABLE tables ADD COLUMN button SMALLINT
    GENERATED ALWAYS AS ((game_state ->> 'button')::smallint) STORED;
