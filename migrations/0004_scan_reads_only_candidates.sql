-- The revive scan reads only the rows that may need an owner. Its lookup of
-- this id's open tables stamped by an earlier incarnation becomes ranges of
-- an index that includes the incarnation, so the tables the current
-- incarnation hosts are never read; tables released by a drain or for a
-- move are found through an index of released tables by reason and owner,
-- so idle-released tables are not read either.
DROP INDEX tables_open_by_owner;
CREATE INDEX tables_open_by_owner ON tables (environment, owner_instance, owner_incarnation)
    WHERE state IN ('open', 'draining');
CREATE INDEX tables_released_by_reason ON tables (environment, state_reason, owner_instance)
    WHERE state = 'released';
