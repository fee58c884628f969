-- isolab service stack `wordpress`, component `db`: run once by
-- `mariadb-install-db --extra-file` at the end of bootstrap (prepare): the
-- WordPress database and its user, reachable over TCP from any address
-- (the web component is on 127.0.0.1 or on the platform's bridge).
-- Bootstrap runs without grant tables; loading them allows CREATE USER.
FLUSH PRIVILEGES;
CREATE DATABASE wordpress CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;
CREATE USER 'wordpress'@'%' IDENTIFIED BY 'password';
GRANT ALL PRIVILEGES ON wordpress.* TO 'wordpress'@'%';
