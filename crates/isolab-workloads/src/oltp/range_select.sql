-- isolab pgbench-oltp: the sum of 100 consecutive accounts' balances (1 table).
\set aid random(1, 100000 * :scale - 99)
SELECT sum(abalance) FROM pgbench_accounts WHERE aid BETWEEN :aid AND :aid + 99;
