-- The action clock survives an owner change (I15): a journalled command
-- that opened a decision records that decision's deadline (Unix ms), so
-- the next owner gives the seat the time it had left, not a fresh clock.
ALTER TABLE journal ADD COLUMN deadline_ms BIGINT CHECK (deadline_ms IS NULL OR deadline_ms >= 0);
