<?php
// isolab service stack `wordpress`, component `web`: prepended by php-fpm to
// every script. WordPress's wp-load.php defines ABSPATH only when it is not
// defined yet and then reads ABSPATH/wp-config.php: pointing ABSPATH at
// @workdir@/web/wordpress/ (this stack's wp-config.php beside symbolic links
// to Debian's wp-includes and wp-admin) configures Debian's read-only WordPress
// without writing /etc/wordpress.
define('ABSPATH', '@workdir@/web/wordpress/');
