-- isolab pgbench-oltp: an account with its branch's balance (2 tables).
\set aid random(1, 100000 * :scale)
SELECT a.abalance, b.bbalance FROM pgbench_accounts a JOIN pgbench_branches b ON b.bid = a.bid WHERE a.aid = :aid;
