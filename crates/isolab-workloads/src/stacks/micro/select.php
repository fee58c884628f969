<?php
// isolab service stack `wordpress`: seed 003's SQL SELECT micro-operation
// (appendix A.6.1), run in the platform against the db component: connects
// as wordpress/password over TCP, selects the database wordpress and times one
// `SELECT * FROM wp_users` (its result read into the client, as mysqli's
// query() does) with hrtime().
//
// Usage: php select.php DB_HOST DB_PORT
// Prints one JSON object on stdout:
//   {"metrics": [{"name": "select_time", "unit": "ms", "direction": "lower", "value": 0.52}]}
// Exits 1 with a message on stderr when the connection or a query fails, 2 on bad usage.

if ($argc !== 3 || !ctype_digit($argv[2])) {
    fwrite(STDERR, "usage: php select.php DB_HOST DB_PORT\n");
    exit(2);
}
[, $host, $port] = $argv;
mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);
try {
    $conn = new mysqli($host, 'wordpress', 'password', null, (int) $port);
    $conn->query('USE wordpress');
    $start = hrtime(true);
    $conn->query('SELECT * FROM wp_users');
    $elapsed = hrtime(true) - $start;
} catch (mysqli_sql_exception $e) {
    fwrite(STDERR, "select.php: database wordpress at $host:$port: " . $e->getMessage() . "\n");
    exit(1);
}
echo json_encode(['metrics' => [
    ['name' => 'select_time', 'unit' => 'ms', 'direction' => 'lower', 'value' => $elapsed / 1e6],
]]), "\n";
