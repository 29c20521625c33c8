-- Reconnect across hostings (I15): a journalled command records the `seq`
-- of the last event its table had told before the command's own events
-- (which follow it, numbered on). The next owner replays the journal and
-- knows which `seq` each event it rebuilt was told with, so a client that
-- reconnects with a `since` from the previous hosting gets the events it
-- missed instead of a snapshot.
ALTER TABLE journal ADD COLUMN told_after BIGINT CHECK (told_after IS NULL OR told_after >= 0);
