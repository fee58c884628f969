<?php
// isolab service stack `wordpress`: the data load. Installs a fixed WordPress
// site into the database at @db.host@:@db.port@ with WordPress's own wp_install():
// title, users, theme, posts and dates are constants, so every fresh working
// directory gets the same front page. Creates the micro-operations' empty
// test_table. Then, with the web component's address as its argument,
// requests the front page once and fails unless it answers 200.
//
// Usage: php @workdir@/web/install.php [WEB_HOST:WEB_PORT]
// Exit status 0 when the site is installed (also when it already was), 1 with
// a message on stderr otherwise.

function fail(string $message): never
{
    fwrite(STDERR, "wordpress data load: $message\n");
    exit(1);
}

// wp_die() would print HTML and exit 0: check the database first.
mysqli_report(MYSQLI_REPORT_OFF);
$check = @new mysqli('@db.host@', 'wordpress', 'password', 'wordpress', @db.port@);
if ($check->connect_error) {
    fail("cannot connect to the database wordpress at @db.host@:@db.port@ as user wordpress: "
        . $check->connect_error . " (is the db component ready and was it prepared with init.sql?)");
}
$check->close();

define('WP_INSTALLING', true);
define('ABSPATH', '@workdir@/web/wordpress/');
$_SERVER['HTTP_HOST'] = 'wordpress.test';
require ABSPATH . 'wp-config.php';

// wp_install() would mail the admin (a pluggable function): there is no mail here.
function wp_new_blog_notification($blog_title, $blog_url, $user_id, $password)
{
}

require_once ABSPATH . 'wp-admin/includes/upgrade.php';

const THEME = 'twentytwentyone';
const DATE = '2016-05-02 12:00:00';
const LATER = '2016-05-03 12:00:00';

if (is_blog_installed()) {
    echo "WordPress is already installed in database wordpress at @db.host@:@db.port@\n";
} else {
    if (!wp_get_theme(THEME)->exists()) {
        fail("theme " . THEME . " is not in " . get_theme_root() . ": install Debian's package wordpress-theme-" . THEME);
    }
    // The admin's password is `password`; no mail is sent.
    $installed = wp_install('isolab', 'admin', 'admin@example.org', true, '', 'password');
    if (is_wp_error($installed) || !is_blog_installed()) {
        fail('wp_install() failed: ' . (is_wp_error($installed) ? $installed->get_error_message() : 'no site'));
    }
    switch_theme(THEME);
    // Seed 003's SELECT reads two users.
    $editor = wp_insert_user([
        'user_login' => 'editor',
        'user_pass' => 'password',
        'user_email' => 'editor@example.org',
        'role' => 'editor',
    ]);
    if (is_wp_error($editor)) {
        fail('cannot add the user editor: ' . $editor->get_error_message());
    }
    // One post beside wp_install()'s "Hello world!": with it the front page
    // has about 10 000 bytes (see mu-plugins/isolab.php).
    $post = wp_insert_post([
        'post_title' => 'Benchmark post',
        'post_content' => "<!-- wp:paragraph -->\n<p>A fixed post: the same bytes on every platform.</p>\n<!-- /wp:paragraph -->",
        'post_status' => 'publish',
        'post_author' => 1,
    ], true);
    if (is_wp_error($post)) {
        fail('cannot add the post: ' . $post->get_error_message());
    }
    // Fixed dates for what was made now: users, posts and pages, the comment.
    global $wpdb;
    $wpdb->query($wpdb->prepare("UPDATE $wpdb->users SET user_registered = %s", DATE));
    $wpdb->query($wpdb->prepare(
        "UPDATE $wpdb->posts SET post_date = %s, post_date_gmt = %s, post_modified = %s, post_modified_gmt = %s",
        DATE, DATE, DATE, DATE
    ));
    $wpdb->query($wpdb->prepare("UPDATE $wpdb->comments SET comment_date = %s, comment_date_gmt = %s", DATE, DATE));
    // The post a day later, so that the front page's order does not depend on ties.
    $wpdb->query($wpdb->prepare(
        "UPDATE $wpdb->posts SET post_date = %s, post_date_gmt = %s, post_modified = %s, post_modified_gmt = %s WHERE ID = %d",
        LATER, LATER, LATER, LATER, $post
    ));
    clean_post_cache($post);
    echo "WordPress installed in database wordpress at @db.host@:@db.port@ (theme " . THEME . ")\n";
}

// The micro-operations' table (seed 003's INSERT script writes 'test' into it).
global $wpdb;
if ($wpdb->query('CREATE TABLE IF NOT EXISTS test_table (id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, test VARCHAR(255) NOT NULL) ENGINE=InnoDB') === false) {
    fail('cannot create test_table: ' . $wpdb->last_error);
}

if (isset($argv[1])) {
    $url = "http://$argv[1]/";
    $page = @file_get_contents($url);
    $status = $http_response_header[0] ?? 'no answer';
    if ($page === false || !str_contains($status, ' 200')) {
        fail("the front page $url answered `$status`: see the web component's log");
    }
    echo "front page $url: " . strlen($page) . " bytes\n";
}
