<?php
// isolab service stack `wordpress`: seed 003's SQL INSERT micro-operation
// (appendix A.6.2), run in the platform against the db component: connects
// as wordpress/password over TCP, selects the database wordpress and times
// COUNT (default 10000) `INSERT INTO test_table(test) VALUES('test')`, one
// statement each (autocommit, as the seed), with hrtime().
//
// Usage: php insert.php DB_HOST DB_PORT [COUNT]
// Prints one JSON object on stdout:
//   {"metrics": [{"name": "insert_time", "unit": "s", "direction": "lower", "value": 4.2}]}
// Exits 1 with a message on stderr when the connection or a query fails, 2 on bad usage.

$count = $argv[3] ?? '10000';
if ($argc < 3 || $argc > 4 || !ctype_digit($argv[2]) || !ctype_digit($count) || $count === '0') {
    fwrite(STDERR, "usage: php insert.php DB_HOST DB_PORT [COUNT]  (COUNT: a positive number, default 10000)\n");
    exit(2);
}
[, $host, $port] = $argv;
mysqli_report(MYSQLI_REPORT_ERROR | MYSQLI_REPORT_STRICT);
try {
    $conn = new mysqli($host, 'wordpress', 'password', null, (int) $port);
    $conn->query('USE wordpress');
    $start = hrtime(true);
    for ($i = 0; $i < (int) $count; $i++) {
        $conn->query("INSERT INTO test_table(test) VALUES('test')");
    }
    $elapsed = hrtime(true) - $start;
} catch (mysqli_sql_exception $e) {
    fwrite(STDERR, "insert.php: database wordpress at $host:$port: " . $e->getMessage() . "\n");
    exit(1);
}
echo json_encode(['metrics' => [
    ['name' => 'insert_time', 'unit' => 's', 'direction' => 'lower', 'value' => $elapsed / 1e9],
]]), "\n";
