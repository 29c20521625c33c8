-- The game a table plays, chosen when it is created. Every table created
-- before games had kinds is a hold'em table.
ALTER TABLE tables ADD COLUMN game_kind TEXT NOT NULL DEFAULT 'holdem';
