-- isolab service stack `mariadb`, component `db`: run once by
-- `mariadb-install-db --extra-file` at the end of bootstrap (prepare): the
-- database `bench` and the user `isolab` (no password), reachable over TCP
-- from any address. Bootstrap runs without grant tables; loading them allows
-- CREATE USER.
FLUSH PRIVILEGES;
CREATE DATABASE bench CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;
CREATE USER 'isolab'@'%';
GRANT ALL PRIVILEGES ON bench.* TO 'isolab'@'%';
