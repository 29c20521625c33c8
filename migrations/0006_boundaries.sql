-- Boundaries are the game's, not poker's: a hand's end, a game's end. The
-- `hands` table already holds what any game records at one (the table, the
-- boundary's number, the fence, the owner, the game's result as JSON) and
-- keeps its name, key and columns; `boundaries` reads it under names that
-- fit every game.
CREATE VIEW boundaries AS
    SELECT table_id, hand_no AS number, fence, owner, result, created_at FROM hands;

-- What a game keeps across boundaries besides seats and stacks (hold'em's
-- button), as the game records it. `button` stays readable, derived from it.
ALTER TABLE tables ADD COLUMN game_state JSONB NOT NULL DEFAULT 'null';
UPDATE tables SET game_state = jsonb_build_object('button', button) WHERE button IS NOT NULL;
ALTER TABLE tables DROP COLUMN button;
ALTER TABLE tables ADD COLUMN button SMALLINT
    GENERATED ALWAYS AS ((game_state ->> 'button')::smallint) STORED;
