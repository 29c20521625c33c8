-- A game that keeps its own clock (chess) is told how long each decision
-- was open when its command came; the journal records that figure with the
-- command, so a replay charges each side exactly what it was charged.
ALTER TABLE journal ADD COLUMN spent_ms BIGINT CHECK (spent_ms IS NULL OR spent_ms >= 0);
