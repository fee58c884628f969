-- isolab pgbench-oltp: one account's balance changed by primary key (1 table).
\set aid random(1, 100000 * :scale)
\set delta random(-5000, 5000)
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
