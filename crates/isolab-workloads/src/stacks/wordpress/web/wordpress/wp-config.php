<?php
// isolab service stack `wordpress`, component `web`: WordPress's
// configuration, read instead of Debian's /usr/share/wordpress/wp-config.php
// because ABSPATH is @workdir@/web/wordpress/ (see prepend.php). Nothing here
// depends on the request, so every platform serves the same bytes.

define('DB_NAME', 'wordpress');
define('DB_USER', 'wordpress');
define('DB_PASSWORD', 'password');
define('DB_HOST', '@db.host@:@db.port@');
define('DB_CHARSET', 'utf8mb4');
define('DB_COLLATE', '');

// Fixed keys and salts: WordPress would otherwise generate and store them.
define('AUTH_KEY', 'isolab-auth-key');
define('SECURE_AUTH_KEY', 'isolab-secure-auth-key');
define('LOGGED_IN_KEY', 'isolab-logged-in-key');
define('NONCE_KEY', 'isolab-nonce-key');
define('AUTH_SALT', 'isolab-auth-salt');
define('SECURE_AUTH_SALT', 'isolab-secure-auth-salt');
define('LOGGED_IN_SALT', 'isolab-logged-in-salt');
define('NONCE_SALT', 'isolab-nonce-salt');

// A fixed site address, whatever address and port the load generator uses
// (mu-plugins/isolab.php turns off the redirect to it).
define('WP_HOME', 'http://wordpress.test');
define('WP_SITEURL', 'http://wordpress.test');

// Themes and plugins from Debian's packages, read-only; uploads (none are
// made) and must-use plugins under the working directory.
define('WP_CONTENT_DIR', '/usr/share/wordpress/wp-content');
define('UPLOADS', 'uploads');
define('WPMU_PLUGIN_DIR', '@workdir@/web/mu-plugins');

// Nothing runs behind the benchmark's back: no cron through HTTP requests to
// itself, no updates, no outgoing requests.
define('DISABLE_WP_CRON', true);
define('AUTOMATIC_UPDATER_DISABLED', true);
define('WP_AUTO_UPDATE_CORE', false);
define('WP_HTTP_BLOCK_EXTERNAL', true);
define('WP_DEBUG', false);

$table_prefix = 'wp_';

// Debian's wp-settings.php loads the rest through ABSPATH, whose wp-includes
// and wp-admin are links to Debian's.
require_once '/usr/share/wordpress/wp-settings.php';
